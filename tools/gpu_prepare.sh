#!/usr/bin/env bash
# The CPU machine's half of tools/gpu_run.sh: every cubin the GPU run needs, built by the pinned toolchain into a
# fresh .cubins/cache (carry `.cubins` and `.whl`), checked to fit a device call's 64 MB. MUTATE_ENTRIES as
# gpu_run.sh reads them (ENTRY or ENTRY:CASE) get their mutants; VARIANT=0 skips the variant's cubins.
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/gpu_variant.sh
export KCONTRACT_CACHE=$PWD/.cubins/cache PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}.
log=$(mktemp)
fail() { echo "gpu_prepare: $*" >&2; tail -5 "$log" >&2; exit 1; }
compiled() {  # a check whose SUMMARY says every compile worked (a stale receipt or record may fail it: no matter)
  python3 -m kcontract check --jobs "${JOBS:-2}" "$@" > "$log" 2>&1
  grep -qE "^SUMMARY check .* compiles \(.*\), 0 failed;" "$log" || fail "kcontract check $* did not compile"
}
rm -rf .cubins/cache && mkdir -p .cubins/cache
compiled
compiled --contract tests/contracts/gpu_faults.yaml
python3 -c "from tests.test_records import warm; warm('.cubins/cache', 'sm_90')" > "$log" 2>&1 || fail "warm"
if [ "${VARIANT:-1}" != 0 ]; then
  variant_contract > "$log" 2>&1 || fail "variant contract"
  compiled --contract contract-variant.yaml
fi
for pick in ${MUTATE_ENTRIES:-}; do
  entry=${pick%%:*}
  cases=()
  [[ $pick == *:* ]] && cases=(--case "${pick#*:}")
  python3 -m kcontract mutate "$entry" "${cases[@]}" --limit "${MUTATE_LIMIT:-30}" --prepare-only > "$log" 2>&1 \
    || fail "mutate $entry --prepare-only"
  grep "^MUTATE" "$log"
done
python3 tools/mma/wgmma_probe.py --build > "$log" 2>&1 || fail "wgmma probe cubin"
find .cubins -name sass.txt -delete
megabytes=$(du -sm .cubins .whl 2>/dev/null | awk '{s += $1} END {print s}')
[ "$megabytes" -lt 64 ] || fail "carry .cubins and .whl is $megabytes MB: a device call takes 64 MB"
echo "gpu_prepare: ready, .cubins and .whl $megabytes MB (carry [\".whl\", \".cubins\"])"
