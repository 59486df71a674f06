import warnings
import numpy as np
from kcontract.contract.loader import load_contract
from kcontract.families.attention.prompt import with_shared_scores
from kcontract.families.attention.reference import call_reference
warnings.simplefilter("ignore")
c = load_contract('contract.yaml', import_kernels=False)
for name, case, rows, n_part in (("prompt_d512_g16_p32", "at_8000", (120, 4), 40),
                                 ("prompt_d256_g2_sliding_bf16", "ring_w1024", (1700, 8), 8)):
    f = c.entry(name).family
    seq = f._seqs(case)[0]
    part = seq.part(*rows)
    ref = call_reference(with_shared_scores(part, f.window_of(f._case(case)), f.scale), f.spec.arithmetic, f.scale, n_part)
    e = {x.output: x for x in ref.expected}
    print(name, case, "rows", rows, f.spec.arithmetic.sum_order, "out decided", round(float(np.mean(e["out"].lo == e["out"].hi)), 3))
