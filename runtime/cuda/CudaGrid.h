//===- CudaGrid.h - Grid-stride launches of the CUDA kernels ----*- C++ -*-===//
//
// Private to the .cu files of runtime/cuda: the block size, the grid for a
// grid-stride loop, the loop itself, the launch check, f32/bf16 loads and
// stores, and the fixed-order sums over a warp and a block.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CUDA_CUDAGRID_H
#define OASR_RUNTIME_CUDA_CUDAGRID_H

#include "CudaKernels.h"

#include <cuda_bf16.h>

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

/// Element `i` of `t` as f32.
__device__ inline float loadF(FloatPtr t, int64_t i) {
  return t.bf16 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(t.p)[i])
                : static_cast<const float *>(t.p)[i];
}
/// Stores `v` at element `i` of `t`, rounded to nearest even for bf16.
__device__ inline void storeF(FloatPtr t, int64_t i, float v) {
  if (t.bf16)
    static_cast<__nv_bfloat16 *>(t.p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float *>(t.p)[i] = v;
}

/// (a, b) summed over the warp by xor shuffles: a fixed order, and every lane
/// gets the same sums.
__device__ inline float2 warpSum2(float a, float b) {
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    b += __shfl_xor_sync(0xffffffffu, b, o);
  }
  return make_float2(a, b);
}
__device__ inline float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// (a, b) summed over the block (blockDim.x a multiple of 32, at most 1024):
/// warps first, then the warps' sums in order. Every thread gets the sums;
/// all threads of the block must call it.
__device__ inline float2 blockSum2(float a, float b) {
  __shared__ float2 part[32];
  float2 w = warpSum2(a, b);
  if ((threadIdx.x & 31) == 0)
    part[threadIdx.x >> 5] = w;
  __syncthreads();
  float2 r = make_float2(0.0f, 0.0f);
  for (unsigned i = 0; i < (blockDim.x + 31) / 32; ++i) {
    r.x += part[i].x;
    r.y += part[i].y;
  }
  __syncthreads();
  return r;
}

} // namespace oasr::rt::cuda

#define OASR_GRID_LOOP(i, n)                                                   \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

#endif // OASR_RUNTIME_CUDA_CUDAGRID_H
