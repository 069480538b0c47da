#!/usr/bin/env bash
# Installs the CUDA 13.0 compiler from PyPI wheels, for building the kernels' PTX on a machine
# with no CUDA toolkit (and no GPU): nvcc, cicc/libnvvm, the CRT and runtime headers, CCCL.
#
#   nvidia-cuda-nvcc     bin/nvcc, ptxas, nvcc.profile      nvidia-nvvm        nvvm/bin/cicc, libdevice
#   nvidia-cuda-crt      include/crt                        nvidia-cuda-runtime include/cuda_runtime.h, ...
#   nvidia-cuda-cccl     include/cccl
#
# All five unpack into one tree, nvidia/cu13/{bin,nvvm,include,lib}, whose nvcc.profile finds
# cicc, libdevice and the headers relative to itself: nvcc works from there with no flags.
# Pinned to CUDA 13.0.x: PTX from a newer nvcc would not JIT on the lent GPUs' driver 580.
#
# Destination: $PONDER_CUDA_DIR, or kernels/.cuda (git-ignored), which build.rs and the PTX
# compile test search. Idempotent: when the pinned set is installed and nvcc runs, it does
# nothing. Needs python3 with pip, and gcc (nvcc preprocesses with it).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${PONDER_CUDA_DIR:-$root/kernels/.cuda}
packages=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
)
stamp=$dest/.ponder-cuda-pins
nvcc=$dest/nvidia/cu13/bin/nvcc

die() { echo "setup-cuda: $*" >&2; exit 1; }

works() {
  [ -x "$nvcc" ] && [ "$(cat "$stamp" 2>/dev/null)" = "${packages[*]}" ] &&
    "$nvcc" --version 2>/dev/null | grep -q "release 13.0"
}

if works; then
  echo "setup-cuda: CUDA 13.0 compiler installed at $nvcc"
  exit 0
fi

command -v python3 >/dev/null || die "python3 is missing; install it (apt-get install -y python3 python3-pip) and rerun"
python3 -m pip --version >/dev/null 2>&1 || die "pip is missing; install it (apt-get install -y python3-pip) and rerun"
command -v gcc >/dev/null || die "gcc is missing (nvcc preprocesses with it); apt-get install -y gcc g++ and rerun"

staging=$dest.partial
rm -rf "$staging"
trap 'rm -rf "$staging"' EXIT
echo "setup-cuda: installing ${packages[*]} from PyPI into $dest"
PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --target "$staging" "${packages[@]}" ||
  die "pip could not install ${packages[*]}; check the network or the PyPI mirror (pip config list), then rerun: bash scripts/setup-cuda.sh"
[ -x "$staging/nvidia/cu13/bin/nvcc" ] || die "the wheels did not provide nvidia/cu13/bin/nvcc; their layout changed"
[ -x "$staging/nvidia/cu13/nvvm/bin/cicc" ] || die "the wheels did not provide nvidia/cu13/nvvm/bin/cicc; their layout changed"
printf '%s' "${packages[*]}" >"$staging/.ponder-cuda-pins"
rm -rf "$dest"
mv "$staging" "$dest"

# Smoke test: one tiny kernel through cicc to PTX, with the fp16/bf16 headers the kernels use.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
cat >"$probe/probe.cu" <<'CU'
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void probe(float* x, const __half* h, const __nv_bfloat16* b) {
  x[threadIdx.x] = __half2float(h[threadIdx.x]) + __bfloat162float(b[threadIdx.x]);
}
CU
"$nvcc" --ptx -arch=compute_80 -o "$probe/probe.ptx" "$probe/probe.cu" ||
  die "$nvcc installed but cannot compile a probe kernel; see its error above"
works || die "$nvcc does not report release 13.0"
echo "setup-cuda: CUDA 13.0 compiler installed at $nvcc"
