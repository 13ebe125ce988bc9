#!/bin/sh
# Regenerates kernels.ptx from kernels.cu; needs nvcc (CUDA 12 or 13). Run through
# `go generate ./cuda/` on a machine with the CUDA toolkit and commit the result: the PTX is
# embedded in the package, so building gorun with -tags cuda needs only the driver's libcuda.
set -e
cd "$(dirname "$0")"
nvcc -ptx -arch=compute_80 -O3 -o kernels.ptx.tmp kernels.cu
mv kernels.ptx.tmp kernels.ptx
