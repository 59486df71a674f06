"""`Builds`: the one owner of a contract's compiled kernels (builds.py), the builders behind it (one per kernel
kind: cuda.py) and what a job carries of a kernel's build (artifact.py, which imports no toolchain)."""
