#!/usr/bin/env bash
# Pack the toolchain of constraints/cuda-13.5.37.txt (NVRTC and its headers, from NVIDIA's wheels) as a small CUDA
# toolkit layout in one archive, for a machine that cannot install it: .pinned/cuda-13.5.37.tar.xz, holding
# lib64/libnvrtc.so.13.5.37 (and libnvrtc.so), libnvrtc-builtins, include/ and version.json. There:
# `tar -xJf .pinned/cuda-13.5.37.tar.xz -C DIR` and TOOLKIT=DIR for tools/gpu_run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^nvidia-cuda-nvrtc==//p' constraints/cuda-13.5.37.txt)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: -d "$work/wheels" -c constraints/cuda-13.5.37.txt \
  nvidia-cuda-nvrtc nvidia-cuda-runtime
mkdir -p "$work/tk/lib64" "$work/tk/include"
unzip -q -o "$work"/wheels/nvidia_cuda_nvrtc-*.whl 'nvidia/cu13/lib/*' -d "$work/x"
unzip -q -o "$work"/wheels/nvidia_cuda_runtime-*.whl 'nvidia/cu13/include/*' -d "$work/x"
cp "$work/x/nvidia/cu13/lib/libnvrtc.so.13" "$work/tk/lib64/libnvrtc.so.$version"
cp "$work"/x/nvidia/cu13/lib/libnvrtc-builtins.so.* "$work/tk/lib64/"
ln -s "libnvrtc.so.$version" "$work/tk/lib64/libnvrtc.so"
cp -r "$work/x/nvidia/cu13/include/." "$work/tk/include/"
printf '{"cuda_nvrtc": {"version": "%s"}, "cuda_cudart": {"version": "%s"}}\n' "$version" "$version" \
  > "$work/tk/version.json"
mkdir -p .pinned
tar -cJf ".pinned/cuda-$version.tar.xz" -C "$work/tk" .
ls -la ".pinned/cuda-$version.tar.xz"
