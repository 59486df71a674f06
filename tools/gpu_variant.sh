# Sourced by gpu_prepare.sh and gpu_run.sh: the bench variant's contract, contract-variant.yaml, the contract's
# kernel VARIANT_KERNEL built with VARIANT_DEFINE (default: one query head per pass) on the entries VARIANT_ONLY
# picks; VARIANT_SMEM=ROLE=EXPR gives the variant's own shared-memory expression where its layout differs.
variant_contract() {
  python3 tools/variant_contract.py "${VARIANT_KERNEL:-window_prompt}" --define "${VARIANT_DEFINE:-WP_MAX_PASS=1}" \
    --only "${VARIANT_ONLY:-prompt_*}" ${VARIANT_SMEM:+--smem "$VARIANT_SMEM"} --out contract-variant.yaml
}
