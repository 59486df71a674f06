"""Verdicts: what a task produced, and the SUMMARY line and exit code over all of them."""
