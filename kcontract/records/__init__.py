"""Gate 5: launch records per kernel instantiation, SM and toolchain, and each SM's limits."""
