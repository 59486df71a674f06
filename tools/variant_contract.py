"""Write a copy of a contract whose named kernel compiles with extra -D options, for `kcontract bench` of a
kernel variant beside the contract's own (controls left out; entries by glob, those of the named kernel; --smem gives a symbol role the
variant's own shared-memory expression where its layout differs).

    python3 tools/variant_contract.py window_prompt --define WP_MAX_PASS=1 --only 'prompt_*' --out contract-pass1.yaml \
        --smem 'partials=(25344 - 8704 * {p_bf16}) + ...'
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

import yaml


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", help="a name under the contract's `kernels:`")
    parser.add_argument("--define", action="append", required=True, help="NAME=VALUE, compiled as -DNAME=VALUE")
    parser.add_argument("--contract", default="contract.yaml")
    parser.add_argument("--only", default="*", help="entries to keep (glob)")
    parser.add_argument("--smem", action="append", default=[], help="ROLE=EXPR, the role's dynamic_smem expression")
    parser.add_argument("--out", required=True, help="where the variant goes (beside the contract: sources resolve)")
    args = parser.parse_args(argv)
    data = yaml.safe_load(Path(args.contract).read_text())
    kernels = data.get("kernels") or {}
    if args.kernel not in kernels or "cuda" not in kernels[args.kernel]:
        print(f"{args.contract}: no CUDA kernel {args.kernel!r} under kernels: (it has {', '.join(kernels)})",
              file=sys.stderr)
        return 2
    cuda = kernels[args.kernel]["cuda"]
    options = [f"-D{d}" for d in args.define]
    for item in args.smem:
        role, _, expression = item.partition("=")
        launch = cuda.get("launch") or {}
        if role not in launch or not expression:
            print(f"--smem {item!r}: give ROLE=EXPR with ROLE one of {args.kernel}'s launch roles ({', '.join(launch)})",
                  file=sys.stderr)
            return 2
        launch[role]["dynamic_smem"] = expression
    cuda["options"] = [*cuda.get("options", []), *options]
    data["entries"] = [e for e in data["entries"]
                       if fnmatch.fnmatch(e["name"], args.only) and e.get("kernel") == args.kernel]
    if not data["entries"]:
        print(f"{args.contract}: no entry matches --only {args.only!r} and runs kernel {args.kernel!r}", file=sys.stderr)
        return 2
    data.pop("controls", None)
    Path(args.out).write_text(yaml.safe_dump(data, sort_keys=False, width=200))
    print(f"{args.out}: {len(data['entries'])} entries, {args.kernel} with {' '.join(options)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
