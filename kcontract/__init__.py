"""kcontract: a kernel-contract verification tool for GPU kernels."""

__version__ = "0.1.0"
