#!/bin/sh
# Regenerates kernels.ptx.gz (gzip of nvcc's PTX) from kernels.cu; needs nvcc (CUDA 12 or 13). Run through
# `go generate ./cuda/` on a machine with the CUDA toolkit and commit the result: the PTX is
# embedded in the package, so building gorun with -tags cuda needs only the driver's libcuda.
set -e
cd "$(dirname "$0")"
nvcc -ptx -arch=compute_80 -O3 -o kernels.ptx.tmp kernels.cu
gzip -9n -c kernels.ptx.tmp > kernels.ptx.gz
rm kernels.ptx.tmp
