#!/usr/bin/env bash
# The GPU machine's run in one go: the wgmma probe (where gpu_prepare.sh built its cubin), the mma probe beside the
# contract run (with its receipt), then the bench into that receipt, then the GPU tests; full logs under $OUT, a
# short table last. STEPS picks steps (default all).
# Before it, on the CPU machine (the GPU machine has neither network nor the pinned toolchain): tools/gpu_prepare.sh
# with the same MUTATE_ENTRIES and VARIANT_* settings; carry .whl (pydantic and its wheels) and .cubins; pass
# KCONTRACT_GIT_COMMIT and KCONTRACT_GIT_DIRTY.
# Mutation campaigns (each compiles nothing here: gpu_prepare.sh prepared them) run each entry's controls and then
# compute-sanitizer on survivors: give one 200 s or more, and a call few of them.
# PACK_TO=DIR (give it the device call's $OUT: `PACK_TO=$OUT bash tools/gpu_run.sh`) gets receipt.json and
# everything else as one logs.tgz at the end (a call brings back few files); the logs then stay in LOGS (default
# /tmp/kcontract-out), which outlives a call while the machine stays warm. Without PACK_TO they go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PACK_TO:-}" ]; then
  OUT=${LOGS:-/tmp/kcontract-out}
  if [ "$(realpath -m "$PACK_TO")" = "$(realpath -m "$OUT")" ]; then
    echo "gpu_run: PACK_TO is the log folder $OUT itself: give PACK_TO the call's \$OUT and leave OUT alone" >&2
    exit 2
  fi
else
  OUT=${OUT:-/tmp/kcontract-out}
fi
STEPS=${STEPS:-wgmma,probe,run,warm,undeclared,sanitize,mutate,bench,variant,ncu,tests}
MUTATE_OUT=${MUTATE_OUT:-/tmp/kcontract-mutate}  # per-entry campaign JSONs, gathered into $OUT/mutate.json
mkdir -p "$OUT" "$MUTATE_OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
fi
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 KCONTRACT_CACHE=$PWD/.cubins/cache KCONTRACT_CARRIED_CACHE=$PWD/.cubins/cache
has() { [[ ",$STEPS," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
started=$SECONDS
if has wgmma && [ -f .cubins/wgmma_probe.cubin ]; then  # wgmma against mma.sync and the model, its layouts (~20 s)
  timeout 120 python3 tools/mma/wgmma_probe.py "$OUT/wgmma" > "$OUT/wgmma.log" 2>&1
  echo "wgmma probe exit $?" >> "$OUT/wgmma.log"
fi
if has probe; then
  (cd tools/mma && timeout 200 python3 mma_probe_device.py "$OUT/mma" > "$OUT/mma.log" 2>&1) &
  probe=$!
fi
if has run; then  # cold: no cached inputs or references; the committed receipt's mutation scores carry over
  rm -rf "$KCONTRACT_CACHE/references"
  [ -f receipts/contract-h200.json ] && [ ! -f "$OUT/receipt.json" ] && cp receipts/contract-h200.json "$OUT/receipt.json"
  began=$SECONDS
  timeout "${RUN_LIMIT:-330}" python3 -m kcontract run --jobs "${JOBS:-auto}" --receipt "$OUT/receipt.json" \
    --json "$OUT/cold.json" --profile > "$OUT/run.log" 2>&1
  echo "run exit $? after $((SECONDS - began)) s (cold)" >> "$OUT/run.log"
fi
if has warm; then  # again, inputs and references from the cache
  began=$SECONDS
  timeout "${RUN_LIMIT:-330}" python3 -m kcontract run --jobs "${JOBS:-auto}" --receipt "$OUT/receipt-warm.json" \
    --json "$OUT/warm.json" --profile > "$OUT/warm.log" 2>&1
  echo "run exit $? after $((SECONDS - began)) s (warm)" >> "$OUT/warm.log"
fi
[ -n "${probe:-}" ] && wait "$probe"
if has undeclared; then  # gate 1 again with the declared orders taken out: the decided fractions they buy
  sed -E 's/score_order: replay/score_order: any/; s/sum_order: window_[a-z_]+/sum_order: any/' contract.yaml \
    > contract-undeclared.yaml
  timeout "${RUN_LIMIT:-330}" python3 -m kcontract run --contract contract-undeclared.yaml --gate 1 --no-controls \
    --jobs "${JOBS:-auto}" --json "$OUT/undeclared.json" > "$OUT/undeclared.log" 2>&1
  echo "undeclared exit $?" >> "$OUT/undeclared.log"
  rm -f contract-undeclared.yaml
fi
if has sanitize; then  # each CUDA entry's smallest case and its controls under compute-sanitizer
  timeout "${SANITIZE_LIMIT:-300}" python3 -m kcontract run --sanitize --jobs "${SANITIZE_JOBS:-16}" \
    --json "$OUT/sanitize.json" > "$OUT/sanitize.log" 2>&1
  echo "sanitize exit $?" >> "$OUT/sanitize.log"
fi
if has mutate; then  # mutation scores into the receipt (mutants prepared here and carried in .cubins)
  for pick in ${MUTATE_ENTRIES:-}; do  # ENTRY or ENTRY:CASE (the mutants run on that case only)
    entry=${pick%%:*}
    cases=()
    [[ $pick == *:* ]] && cases=(--case "${pick#*:}")
    timeout "${MUTATE_LIMIT_S:-200}" python3 -m kcontract mutate "$entry" "${cases[@]}" --limit "${MUTATE_LIMIT:-30}" \
      --receipt "$OUT/receipt.json" --json "$MUTATE_OUT/mutate-$entry.json" >> "$OUT/mutate.log" 2>&1
    echo "mutate $entry exit $?" >> "$OUT/mutate.log"
  done
  # one file for every campaign so far (a call brings back few files): {entry: campaign}
  python3 -c 'import json, pathlib, sys; print(json.dumps({p.stem[len("mutate-"):]: json.loads(p.read_text())
    for p in sorted(pathlib.Path(sys.argv[1]).glob("mutate-*.json"))}, indent=1))' "$MUTATE_OUT" > "$OUT/mutate.json"
fi
if has bench; then
  receipt=()
  [ -f "$OUT/receipt.json" ] && receipt=(--receipt "$OUT/receipt.json")
  timeout "${BENCH_LIMIT:-150}" python3 -m kcontract bench ${BENCH_ARGS:-} "${receipt[@]}" --json "$OUT/bench.json" \
    > "$OUT/bench.log" 2>&1
fi
if has variant; then  # the bench again for a kernel variant (its cubins prepared there by gpu_prepare.sh)
  source tools/gpu_variant.sh
  variant_contract > "$OUT/variant.log" 2>&1
  timeout "${BENCH_LIMIT:-150}" python3 -m kcontract bench --contract contract-variant.yaml ${BENCH_ARGS:-} \
    --json "$OUT/bench-variant.json" >> "$OUT/variant.log" 2>&1
fi
if has ncu; then  # hardware counters of one prompt partials launch (clocks left alone, METHOD.md)
  ncu_one() {
    timeout "${NCU_LIMIT:-90}" ncu --clock-control none --kernel-name "regex:${NCU_KERNEL:-window_prompt_partials}" \
      --launch-skip 1 --launch-count 1 "$@" \
      python3 -m kcontract bench --only "${NCU_ONLY:-prompt_d512_g16_p32}" --keys "${NCU_KEYS:-32768}" --repeat 3
  }
  ncu_one --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats > "$OUT/ncu.log" 2>&1
  stalls="regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$"  # what the warps wait on, per issue
  ncu_one --metrics "$stalls,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum" \
    >> "$OUT/ncu.log" 2>&1
fi
if has tests; then
  timeout "${TESTS_LIMIT:-400}" python3 -m pytest -v --durations=10 -m gpu -rs -p no:cacheprovider tests > "$OUT/gpu-tests.log" 2>&1
fi
echo "--- $(cat "$OUT/gpu.txt"), $((SECONDS - started)) s"
[ -f "$OUT/wgmma.log" ] && tail -12 "$OUT/wgmma.log"
[ -f "$OUT/mma.log" ] && grep -E "MATCH|FINAL|LAYOUT" "$OUT/mma.log" | tail -4
[ -f "$OUT/run.log" ] && grep -E "FAIL|MISSED|error|crashed|timed out|SUMMARY|run exit|worst:|jobs auto" "$OUT/run.log" | cut -c1-220 | tail -40
[ -f "$OUT/cold.json" ] && python3 tools/profile_top.py "$OUT/cold.json" 12
[ -f "$OUT/warm.log" ] && grep -E "SUMMARY|run exit|jobs auto" "$OUT/warm.log"
[ -f "$OUT/warm.json" ] && python3 tools/profile_top.py "$OUT/warm.json" 6
[ -f "$OUT/undeclared.json" ] && [ -f "$OUT/receipt.json" ] && python3 tools/decided_table.py "$OUT/receipt.json" "$OUT/undeclared.json"
[ -f "$OUT/sanitize.log" ] && grep -vE ": clean, " "$OUT/sanitize.log" | cut -c1-300 | tail -30
[ -f "$OUT/mutate.log" ] && grep -E "^(MUTATE|survived|mutate)" "$OUT/mutate.log" | cut -c1-300
[ -f "$OUT/bench.log" ] && tail -60 "$OUT/bench.log" | cut -c1-200
[ -f "$OUT/variant.log" ] && grep -E "^prompt|contract-variant" "$OUT/variant.log" | cut -c1-200
[ -f "$OUT/ncu.log" ] && grep -E "Throughput|Pipe|Registers|Achieved Occupancy|Duration|Warp Cycles|hmma|inst_executed" "$OUT/ncu.log" | head -24
[ -f "$OUT/ncu.log" ] && grep -E "issue_stalled" "$OUT/ncu.log" | sort -k3 -g -r | head -8
[ -f "$OUT/gpu-tests.log" ] && tail -16 "$OUT/gpu-tests.log"
if [ -n "${PACK_TO:-}" ]; then
  mkdir -p "$PACK_TO"
  [ -f "$OUT/receipt.json" ] && cp "$OUT/receipt.json" "$PACK_TO/receipt.json"
  tar -czf "$PACK_TO/logs.tgz" -C "$OUT" --exclude=./receipt.json --exclude=./logs.tgz . && echo "packed: $PACK_TO/receipt.json, logs.tgz"
fi
