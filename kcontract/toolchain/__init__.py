"""The pinned CUDA toolchain: NVRTC compiles to cubins, nvdisasm and cuobjdump from NVIDIA's wheels, a compile cache."""
