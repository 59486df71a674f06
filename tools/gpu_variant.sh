# Sourced by gpu_prepare.sh and gpu_run.sh: the bench variant's contract, contract-variant.yaml, the contract's
# kernel VARIANT_KERNEL built with VARIANT_DEFINE (default: at most two query heads per pass, the layout before
# four) on the entries VARIANT_ONLY picks; VARIANT_SMEM=ROLE=EXPR gives the variant's own shared-memory expression
# where its layout differs.
variant_contract() {
  # two heads per pass where G is even: HP heads' fronts of F bytes, then as many V stages of S bytes as fit, at
  # most 8 (the kernel traps on any other size)
  local F="(25344 - 8704 * {p_bf16})" S="(32 * {head_dim} + 2048)" HP="(2 - {group} % 2)"
  local two="$HP * $F + min(8, ({smem_optin} - $HP * $F) // $S) * $S"
  python3 tools/variant_contract.py "${VARIANT_KERNEL:-window_prompt}" --define "${VARIANT_DEFINE:-WP_MAX_PASS=2}" \
    --only "${VARIANT_ONLY:-prompt_*}" --smem "${VARIANT_SMEM:-partials=$two}" --out contract-variant.yaml
}
