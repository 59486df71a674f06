"""A run of a contract, owned in one place: loaded and validated once, planned, built once, run, written."""
