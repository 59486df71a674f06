"""Tools run outside the package: the GPU machine's run script and the tensor-core probe."""
