#!/usr/bin/env bash
# The device run in one go: carried wheels, environment, the contract with a receipt, GPU tests; results in $OUT.
# Before it, here: python3 -c "from tests.test_records import warm; warm('.cubins/cache', 'sm_90')"; carry .whl .cubins
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kcontract-out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:.
else
  export PYTHONPATH=.
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m kcontract run --jobs 4 --receipt "$OUT/receipt.json" --json "$OUT/run.json" 2>&1 | tee "$OUT/run.log"
python3 -m kcontract run --contract tests/contracts/cpu.yaml --jobs 8 --json "$OUT/cpu.json" > "$OUT/cpu.log" 2>&1
[ -d .cubins/cache ] && export KCONTRACT_CARRIED_CACHE=.cubins/cache
python3 -m pytest -q -m gpu -rs tests > "$OUT/gpu-tests.log" 2>&1
echo "--- table"
grep -h "SUMMARY" "$OUT/run.log" "$OUT/cpu.log"
tail -3 "$OUT/gpu-tests.log"
