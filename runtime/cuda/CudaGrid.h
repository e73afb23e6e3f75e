//===- CudaGrid.h - Grid-stride launches of the CUDA kernels ----*- C++ -*-===//
//
// Private to the .cu files of runtime/cuda: the block size, the grid for a
// grid-stride loop, the loop itself, and the launch check.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CUDA_CUDAGRID_H
#define OASR_RUNTIME_CUDA_CUDAGRID_H

#include "CudaKernels.h"

namespace oasr::rt::cuda {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over `n` elements.
inline unsigned blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1)
    b = 1;
  return unsigned(b > 65535 * 16 ? 65535 * 16 : b);
}

/// Checks the launch just made; `what` names the kernel in the error.
inline void launched(const char *what) { check(cudaGetLastError(), what); }

} // namespace oasr::rt::cuda

#define OASR_GRID_LOOP(i, n)                                                   \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

#endif // OASR_RUNTIME_CUDA_CUDAGRID_H
