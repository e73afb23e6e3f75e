//===- GradWire.cu - f32 <-> bf16/f16 for gradients on the wire (GPU) -----===//
//
// The device side of GradWire.h: the fused gradient buffer rounded to bf16
// or f16 (round to nearest, ties to even, as the host conversions) before
// the NCCL allreduce, and converted back and scaled by 1/P after it.
//
//===----------------------------------------------------------------------===//

#include "CudaGrid.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace oasr::rt::cuda {
namespace {

__global__ void toBF16Kernel(const float *x, __nv_bfloat16 *y, int64_t n) {
  OASR_GRID_LOOP(i, n) { y[i] = __float2bfloat16_rn(x[i]); }
}

__global__ void toF16Kernel(const float *x, __half *y, int64_t n) {
  OASR_GRID_LOOP(i, n) { y[i] = __float2half_rn(x[i]); }
}

__global__ void fromBF16Kernel(const __nv_bfloat16 *x, float *y, int64_t n,
                               float scale) {
  OASR_GRID_LOOP(i, n) { y[i] = __bfloat162float(x[i]) * scale; }
}

__global__ void fromF16Kernel(const __half *x, float *y, int64_t n,
                              float scale) {
  OASR_GRID_LOOP(i, n) { y[i] = __half2float(x[i]) * scale; }
}

} // namespace

void launchToWire(bool bf16, const float *x, void *y, int64_t n,
                  cudaStream_t stream) {
  if (n <= 0)
    return;
  if (bf16)
    toBF16Kernel<<<blocksFor(n), kThreads, 0, stream>>>(
        x, static_cast<__nv_bfloat16 *>(y), n);
  else
    toF16Kernel<<<blocksFor(n), kThreads, 0, stream>>>(
        x, static_cast<__half *>(y), n);
  launched("gradient to wire type");
}

void launchFromWire(bool bf16, const void *x, float *y, int64_t n, float scale,
                    cudaStream_t stream) {
  if (n <= 0)
    return;
  if (bf16)
    fromBF16Kernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(x), y, n, scale);
  else
    fromF16Kernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const __half *>(x), y, n, scale);
  launched("gradient from wire type");
}

} // namespace oasr::rt::cuda
