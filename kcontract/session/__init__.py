"""A command on a contract, owned in one place: loaded once, the machine checked once, a run planned, built once,
run while listeners hear it, reported and written."""
