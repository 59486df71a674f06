"""The CUDA toolchain this environment has: NVRTC and its headers found (`locate`), compiles to cubins through a
content-addressed cache (`build`), nvdisasm and cuobjdump (`tools`)."""
