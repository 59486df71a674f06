import time, warnings
import numpy as np
warnings.simplefilter("ignore")
from kcontract.contract.loader import load_contract
from kcontract.families.attention.prompt import with_shared_scores
from kcontract.families.attention.reference import call_reference
c = load_contract('contract.yaml', import_kernels=False)
for name, case, rows, npart in (("prompt_d512_g16_p32", "at_8000", (120, 4), 40), ("prompt_d256_g2_sliding_bf16", "ring_w1024", (1700, 8), 8)):
    f = c.entry(name).family
    seq = f._seqs(case)[0]; part = seq.part(*rows); w = f.window_of(f._case(case))
    t = time.time(); ref = call_reference(with_shared_scores(part, w, f.scale), f.spec.arithmetic, f.scale, npart)
    e = {x.output: x for x in ref.expected}
    print(name, f.spec.arithmetic.sum_order, 'out decided', round(np.mean(e['out'].lo == e['out'].hi), 3), round(time.time() - t, 1), 's')
