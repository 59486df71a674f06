#!/usr/bin/env bash
# The GPU machine's run in one go, as a kernel author runs it: kcontract installed into the machine's own Python
# (its torch, CuPy and NVRTC as they are), the receipt's rows that are not current refreshed (`stale`, the default)
# or the whole contract run cold (`run`), then the optional steps (bench, mutate, sanitize, peers, drift, plugin,
# tests);
# full logs under $OUT (the receipts, run.log and run.json as they are, the rest in logs.tgz), a short table last.
# STEPS picks steps (default install,stale).
#   RECHECK=1     the stale step also re-runs rows judged by an earlier kcontract (--recheck)
#   RECEIPT=F     the receipt to write (default receipts/contract-h200.json); an existing one's mutation scores
#                 carry over where the kernel is unchanged
#   TOOLKIT=DIR   compile with the toolchain in DIR (lib64/libnvrtc.so, include/, version.json: the layout
#                 tools/pinned_toolkit.sh packs) instead of the environment's
#   MUTATE="E1 E2:CASE"  entries whose mutation campaigns the mutate step runs (a case after ':' narrows one;
#                 MUTATE_PARALLEL at once, each with MUTATE_JOBS workers), each
#                 of MUTATE_COUNT mutants (default 30) and cut at MUTATE_LIMIT_S seconds (default 150), equivalence
#                 judged on MUTATE_SM (default: kcontract's, the contract's target for the GPU); the scores go into
#                 $OUT/receipt.json (a copy of RECEIPT when the run step did not write it; the bench adds there too);
#                 every campaign's state (mutants judged so far, patches, its contract) goes to $OUT/campaigns.tgz
#   MUTATE_RESUME=F  a campaigns.tgz of an earlier machine: campaigns cut short there go on from where they stopped
#   KCONTRACT_GIT_COMMIT, KCONTRACT_GIT_DIRTY   the tree's commit and whether it differs from it: give them where
#                 the tree travelled without its .git, or with a stale one (a copy sent to a GPU machine)
# An offline machine: carry in .whl/ the wheels pip cannot find there (pydantic, pyelftools, import-linter and what
# they need); pip looks there and nowhere else, and builds kcontract with the machine's setuptools.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kcontract-out}
STEPS=${STEPS:-install,stale}
RECEIPT=${RECEIPT:-receipts/contract-h200.json}
mkdir -p "$OUT"
has() { [[ ",$STEPS," == *",$1,"* ]]; }
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
started=$SECONDS
if has install; then  # README's GPU install, word for word, with pip pointed at the carried wheels only
  export PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.whl PIP_NO_BUILD_ISOLATION=0 PIP_DISABLE_PIP_VERSION_CHECK=1
  { python3 -m pip install -e ".[dev,cu13]"; echo "install exit $?"; python3 -m pip check; echo "pip check exit $?"
    python3 -m pip list 2>/dev/null | grep -iE "^(torch|cupy|cuda|nvidia-cuda|pydantic|numpy) "; } \
    > "$OUT/install.log" 2>&1
fi
if [ -n "${TOOLKIT:-}" ]; then
  export KCONTRACT_NVRTC=$TOOLKIT/lib64/libnvrtc.so KCONTRACT_CUDA_INCLUDE=$TOOLKIT/include
fi
export KCONTRACT_CACHE=/tmp/kcontract-cache
if has run; then  # cold: an empty cache
  rm -rf "$KCONTRACT_CACHE"
  [ -f "$RECEIPT" ] && cp "$RECEIPT" "$OUT/receipt.json"
  began=$SECONDS
  timeout "${RUN_LIMIT:-420}" kcontract run --receipt "$OUT/receipt.json" --json "$OUT/run.json" --profile \
    > "$OUT/run.log" 2>&1
  echo "run exit $? after $((SECONDS - began)) s (cold; kcontract is $(command -v kcontract))" >> "$OUT/run.log"
fi
if has stale; then  # only the rows that are not current, cold, written into a copy of the receipt
  rm -rf "$KCONTRACT_CACHE"
  [ -f "$RECEIPT" ] && cp "$RECEIPT" "$OUT/receipt.json"
  began=$SECONDS
  timeout "${RUN_LIMIT:-420}" kcontract run --stale ${RECHECK:+--recheck} --receipt "$OUT/receipt.json" \
    --json "$OUT/run.json" --profile > "$OUT/run.log" 2>&1
  echo "run exit $? after $((SECONDS - began)) s (stale, cold; kcontract is $(command -v kcontract))" >> "$OUT/run.log"
fi
if has bench || has mutate; then
  [ -f "$OUT/receipt.json" ] || cp "$RECEIPT" "$OUT/receipt.json"
fi
if has bench; then
  timeout "${BENCH_LIMIT:-150}" kcontract bench ${BENCH_ARGS:-} --receipt "$OUT/receipt.json" --json "$OUT/bench.json" \
    > "$OUT/bench.log" 2>&1
  echo "bench exit $?" >> "$OUT/bench.log"
fi
if has mutate; then  # MUTATE_PARALLEL campaigns at once (default 1), each with MUTATE_JOBS workers (default auto)
  campaign() {
    local spec=$1 entry=${1%%:*} narrow=()
    [[ $spec == *:* ]] && narrow=(--case "${spec#*:}")
    timeout -s TERM "${MUTATE_LIMIT_S:-150}" kcontract mutate "$entry" "${narrow[@]}" --limit "${MUTATE_COUNT:-30}" \
      --jobs "${MUTATE_JOBS:-auto}" ${MUTATE_SM:+--sm "$MUTATE_SM"} --receipt "$OUT/receipt.json" \
      --json "$OUT/mutate-$entry.json" > "$OUT/mutate-$entry.log" 2>&1
    echo "mutate $entry exit $?" >> "$OUT/mutate-$entry.log"
  }
  mkdir -p "$KCONTRACT_CACHE/mutants"
  [ -n "${MUTATE_RESUME:-}" ] && tar xzf "$MUTATE_RESUME" -C "$KCONTRACT_CACHE/mutants"
  for spec in ${MUTATE:-}; do
    while [ "$(jobs -rp | wc -l)" -ge "${MUTATE_PARALLEL:-1}" ]; do wait -n; done
    campaign "$spec" &
  done
  wait
  for spec in ${MUTATE:-}; do cat "$OUT/mutate-${spec%%:*}.log" >> "$OUT/mutate.log"; done
  ( cd "$KCONTRACT_CACHE/mutants" && tar czf "$OUT/campaigns.tgz" --exclude="*.cubin" . )
fi
if has sanitize; then  # each CUDA entry's smallest case and its controls under compute-sanitizer
  timeout "${SANITIZE_LIMIT:-300}" kcontract run --sanitize --json "$OUT/sanitize.json" > "$OUT/sanitize.log" 2>&1
  echo "sanitize exit $?" >> "$OUT/sanitize.log"
fi
if has peers; then  # the peer kernels (examples/peers): their self-test, then their contract's stale rows (PEERS_WHOLE=1: all)
  PEERS_RECEIPT=${PEERS_RECEIPT:-examples/peers/receipts/contract-h200.json}
  [ -f "$PEERS_RECEIPT" ] && cp "$PEERS_RECEIPT" "$OUT/peers-receipt.json"
  { timeout 300 python3 -m examples.peers.selftest; echo "selftest exit $?"; } > "$OUT/peers-selftest.log" 2>&1
  peers_mode=--stale
  [ -n "${PEERS_WHOLE:-}" ] && peers_mode=
  timeout "${PEERS_LIMIT:-400}" kcontract run --contract examples/peers/contract.yaml $peers_mode \
    --receipt "$OUT/peers-receipt.json" \
    --json "$OUT/peers.json" > "$OUT/peers.log" 2>&1
  echo "peers exit $?" >> "$OUT/peers.log"
fi
if has drift; then  # the example model at real widths in bf16: a decode step after a 4,096-token prompt and a
  # 16-token prefill, each first op as an entry
  for step in "decode 1 4096" "prefill 16 0"; do
    set -- $step
    timeout "${DRIFT_LIMIT:-200}" kcontract drift examples.drift.llama:real --tokens "$2" --context "$3" --batch 2,8,64 \
      --json "$OUT/drift-$1.json" --emit-contract "$OUT/drift-$1/contract.yaml" > "$OUT/drift-$1.log" 2>&1
    echo "drift $1 exit $?" >> "$OUT/drift-$1.log"
    if [ -f "$OUT/drift-$1/contract.yaml" ]; then
      timeout 200 kcontract run --contract "$OUT/drift-$1/contract.yaml" >> "$OUT/drift-$1.log" 2>&1
      echo "emitted entry exit $?" >> "$OUT/drift-$1.log"
    fi
  done
fi
if has plugin; then  # the pytest plugin on the GPU: one item per entry x gate and per control
  timeout "${PLUGIN_LIMIT:-200}" python3 -m pytest -p no:cacheprovider -q -rs --kcontract tests/contracts/gpu_device.yaml \
    > "$OUT/plugin.log" 2>&1
  echo "plugin exit $?" >> "$OUT/plugin.log"
fi
if has tests; then
  timeout "${TESTS_LIMIT:-400}" python3 -m pytest -v --durations=10 -m gpu -rs -p no:cacheprovider tests \
    > "$OUT/gpu-tests.log" 2>&1
fi
echo "--- $(cat "$OUT/gpu.txt"), $((SECONDS - started)) s"
[ -f "$OUT/install.log" ] && grep -E "exit|^(torch|cupy|cuda|nvidia-cuda|pydantic) |Successfully|ERROR" "$OUT/install.log"
[ -f "$OUT/run.log" ] && grep -E "^toolchain|^gate 5|^note|^--stale|FAIL|MISSED|ERROR|crashed|timed out|SUMMARY|run exit|jobs auto" \
  "$OUT/run.log" | cut -c1-240 | tail -30
[ -f "$OUT/bench.log" ] && tail -40 "$OUT/bench.log" | cut -c1-200
[ -f "$OUT/sanitize.log" ] && grep -vE ": clean, " "$OUT/sanitize.log" | cut -c1-300 | tail -20
[ -f "$OUT/mutate.log" ] && grep -E "^(MUTATE|survived|mutate .* exit)" "$OUT/mutate.log" | cut -c1-240
[ -f "$OUT/gpu-tests.log" ] && tail -16 "$OUT/gpu-tests.log"
[ -f "$OUT/peers-selftest.log" ] && grep -E "^peer|exit" "$OUT/peers-selftest.log" | cut -c1-200
[ -f "$OUT/peers.log" ] && grep -E "^--stale|FAIL|MISSED|ERROR|crashed|timed out|SUMMARY|peers exit|error" "$OUT/peers.log" | cut -c1-240 | tail -30
[ -f "$OUT/plugin.log" ] && tail -6 "$OUT/plugin.log"
for f in "$OUT"/drift-*.log; do [ -f "$f" ] && grep -E "^(drift|first|  its|reaches|ERROR|SUMMARY|emitted)" "$f" | cut -c1-200; done
# What comes back from a machine may be few files: the receipts and the run's log stay, the rest goes into logs.tgz.
rm -f "$OUT"/*.lock
( cd "$OUT" && ls | grep -vxE "receipt.json|peers-receipt.json|run.log|run.json" > .packed
  [ -s .packed ] && tar czf logs.tgz -T .packed && xargs rm -f < .packed; rm -f .packed )
true
