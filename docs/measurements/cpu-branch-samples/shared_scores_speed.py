import time
import numpy as np
from kcontract.contract.loader import load_contract
from kcontract.families.attention.prompt import with_shared_scores
from kcontract.families.attention.reference import call_reference
c = load_contract('contract.yaml', import_kernels=False)
f = c.entry('prompt_d256_g2_sliding_bf16').family
seq = f._seqs('ring_w1024')[0]
from dataclasses import replace
w = f.window_of(f._case('ring_w1024'))
part = seq.part(105, 24)
a = f.spec.arithmetic
t = time.time(); ref0 = call_reference(part.rows(w), a, f.scale, 6); t0 = time.time() - t
t = time.time(); ref1 = call_reference(with_shared_scores(part, w, f.scale), a, f.scale, 6); t1 = time.time() - t
for e0, e1 in zip(ref0.expected, ref1.expected):
    assert e0.output == e1.output and np.array_equal(e0.lo, e1.lo) and np.array_equal(e0.hi, e1.hi), e0.output
print('identical; per-row', round(t0, 2), 'shared', round(t1, 2))
