//===- CudaKernels.h - Internals shared by the CUDA backend -----*- C++ -*-===//
//
// Private to runtime/cuda: the device-side launchers written in CUDA
// (CudaKernels.cu, CudaPointwise.cu, GradWire.cu) that the host code (the
// family files, CudaBackend.cpp) calls, the parameter blocks they take by
// value, and the error helpers. Every launcher
// enqueues on `stream` and returns at once; none synchronizes.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CUDA_CUDAKERNELS_H
#define OASR_RUNTIME_CUDA_CUDAKERNELS_H

#include "../OpGeometry.h"
#include "oasr/Runtime/Kernel.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace oasr::rt {
class KernelBackend;
} // namespace oasr::rt

namespace oasr::rt::cuda {

/// Ends the process through fatalKernelError with "<what>: <CUDA error>"
/// (naming the running node) when `status` is not cudaSuccess. Kernels run
/// long after their node was planned, so a failure there cannot be
/// returned.
void check(cudaError_t status, const char *what);
/// The stream every kernel of `backend` (a CUDA backend) runs on.
cudaStream_t computeStream(KernelBackend &backend);

/// Gradients on the wire (GradWire.cu): y = x rounded to bf16 (`bf16`) or
/// f16, to nearest even; and back, y = float(x) * scale.
void launchToWire(bool bf16, const float *x, void *y, int64_t n,
                  cudaStream_t stream);
void launchFromWire(bool bf16, const void *x, float *y, int64_t n, float scale,
                    cudaStream_t stream);

/// Limits of the by-value parameter blocks below.
constexpr int kMaxRank = 8;
constexpr int kMaxOperands = 8;

/// A float tensor in device memory: f32, or bf16 that kernels read and write
/// through f32 arithmetic. Null `p` stands for an absent operand or result.
struct FloatPtr {
  void *p = nullptr;
  bool bf16 = false;
};

/// Numpy broadcasting of up to kMaxOperands operands onto a result of rank
/// <= kMaxRank: operand j's element for result coordinates c is
/// x[j][sum_d c[d] * strides[j][d]] (stride 0 on broadcast dimensions).
struct Broadcast {
  int rank = 0, operands = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxOperands][kMaxRank] = {};
  const void *x[kMaxOperands] = {};
  /// For f32/bf16 results: which operands hold bf16 (the rest f32).
  bool bf16[kMaxOperands] = {};
};

/// y = x0 op x1 op x2 ... (left fold), results of `dtype` (f32, bf16 in
/// f32 arithmetic, i64, i32); f32/bf16 results take any mix of f32 and bf16
/// operands (Broadcast::bf16).
void launchNary(const Broadcast &b, BinOp op, DType dtype, void *y, int64_t n,
                cudaStream_t stream);
/// y = scale * x[broadcast] (f32): expands x onto y's shape.
void launchExpand(const Broadcast &b, float scale, float *y, int64_t n,
                  cudaStream_t stream);

/// A reduction of x onto a result: result element o sums x over the
/// `inner` elements at base(o) + inner offset, where base(o) decomposes o
/// over `outDims` with `outStrides` and the inner offset decomposes an index
/// over `redDims` with `redStrides` (element strides into x).
struct Reduction {
  int outRank = 0, redRank = 0;
  int64_t outDims[kMaxRank] = {}, outStrides[kMaxRank] = {};
  int64_t redDims[kMaxRank] = {}, redStrides[kMaxRank] = {};
  int64_t inner = 1;
};
/// y[o] = the largest (`max`) or smallest x of result element o's; a NaN
/// among them is the result.
void launchReduceExtreme(const Reduction &r, const float *x, float *y,
                         int64_t outputs, bool max, cudaStream_t stream);
/// y[o] = the product of result element o's x, in order, one thread each.
void launchReduceProd(const Reduction &r, const float *x, float *y,
                      int64_t outputs, cudaStream_t stream);
/// y[o] = scale * sum x (f32 sums, one block per result element, fixed
/// order).
void launchReduce(const Reduction &r, FloatPtr x, float scale, FloatPtr y,
                  int64_t outputs, cudaStream_t stream);
inline void launchReduce(const Reduction &r, const float *x, float scale,
                         float *y, int64_t outputs, cudaStream_t stream) {
  launchReduce(r, FloatPtr{const_cast<float *>(x)}, scale, FloatPtr{y}, outputs,
               stream);
}

/// y[c] = sum over r of x[r * cols + c]: 32 columns per block, rows in a
/// fixed order (coalesced, where launchReduce reads a column per block).
void launchSumRows(int64_t rows, int64_t cols, FloatPtr x, FloatPtr y,
                   cudaStream_t stream);

/// y = -x on f32/i64/i32.
void launchNeg(DType dtype, const void *x, void *y, int64_t n,
               cudaStream_t stream);
/// y = max(x, 0); dx = y > 0 ? dy : 0; f32 or bf16 elements of type `t`.
void launchRelu(DType t, const void *x, void *y, int64_t n,
                cudaStream_t stream);
void launchReluGrad(DType t, const void *dy, const void *y, void *dx, int64_t n,
                    cudaStream_t stream);

/// Softmax cross-entropy (geometry: ../OpGeometry.h): scores, labels ->
/// loss, logProb. `rowLoss` (n*d floats) and `rowCount`
/// (n*d ints) are scratch.
void launchSce(const SceGeom &p, const float *scores, const void *labels,
               float *loss, float *logProb, float *rowLoss, int *rowCount,
               cudaStream_t stream);
/// dLoss, logProb, labels -> dScores; `count` is one int of scratch.
void launchSceGrad(const SceGeom &p, const float *dLoss, const float *logProb,
                   const void *labels, float *dScores, int *count,
                   cudaStream_t stream);

/// Pooling on Pool2D geometry (../OpGeometry.h). MaxPool: Y and (optional) flat
/// per-plane Indices, PyTorch's convention.
void launchMaxPool(const Pool2D &p, const float *x, float *y, int64_t *indices,
                   cudaStream_t stream);
/// MaxPoolGrad: dX[plane][indices] += dY in output order, one thread per
/// plane (the CPU backend's summation order).
void launchMaxPoolGrad(int64_t planes, int64_t inPlane, int64_t outPlane,
                       const float *dy, const int64_t *indices, float *dx,
                       cudaStream_t stream);
/// The same where the forward's geometry is known: a thread per dX element
/// gathers (no per-plane loop).
void launchMaxPoolGrad(const Pool2D &p, const float *dy, const int64_t *indices,
                       float *dx, cudaStream_t stream);
/// AveragePool and its gradient (gathered per input element, no atomics).
void launchAvgPool(const Pool2D &p, const float *x, float *y,
                   cudaStream_t stream);
void launchAvgPoolGrad(const Pool2D &p, const float *dy, float *dx,
                       cudaStream_t stream);

/// out[o] = in[o - begin] inside `in`, else `value` (f32, rank <= kMaxRank).
struct PadParams {
  int rank = 0;
  int64_t inDims[kMaxRank] = {}, outDims[kMaxRank] = {}, begin[kMaxRank] = {};
};
void launchPad(const PadParams &p, const float *in, float *out, float value,
               int64_t n, cudaStream_t stream);

/// Slice as a strided copy of elements of `elemBytes` (1, 4 or 8):
/// out[c] = in[sum_d (start[d] + c[d] * step[d]) * inStrides[d]] over the
/// result's coordinates c; with `scatter` the other way round (in[...] =
/// out[c], the caller zeroes `in`: SliceGrad).
struct SliceParams {
  int rank = 0;
  int64_t outDims[kMaxRank] = {}, inStrides[kMaxRank] = {},
          start[kMaxRank] = {}, step[kMaxRank] = {};
};
void launchSlice(const SliceParams &p, int elemBytes, const void *in, void *out,
                 int64_t n, bool scatter, cudaStream_t stream);

/// Resize over [planes, H, W] with the sampling tables of ResizeGeom in
/// device memory: y[p, oy, ox] = sum over the taps of hWeight * wWeight *
/// x[p, hIndex, wIndex]. The gradient gathers instead of scattering (no
/// atomics, so it repeats bitwise): dx[p, iy, ix] = sum over the result
/// indices that read iy (hStart[iy]..hStart[iy + 1] of hOut/hInvWeight)
/// and ix of their weights times dy.
struct ResizeParams {
  int tapsH = 1, tapsW = 1;
  int64_t inH = 1, inW = 1, outH = 1, outW = 1;
  const int64_t *hIndex = nullptr, *wIndex = nullptr;
  const float *hWeight = nullptr, *wWeight = nullptr;
  const int64_t *hStart = nullptr, *hOut = nullptr, *wStart = nullptr,
                *wOut = nullptr;
  const float *hInvWeight = nullptr, *wInvWeight = nullptr;
};
void launchResize(const ResizeParams &p, bool grad, const float *src,
                  float *dst, int64_t planes, cudaStream_t stream);

/// Dropout with the CPU backend's mask (dropoutKeeps, OpGeometry.h):
/// y = keep ? x * scale : 0, mask = keep (mask may be null); and its
/// gradient dx = mask ? dy * scale : 0.
void launchDropout(uint64_t stepKey, uint64_t threshold, float scale,
                   const float *x, float *y, uint8_t *mask, int64_t n,
                   cudaStream_t stream);
void launchDropoutGrad(float scale, const float *dy, const uint8_t *mask,
                       float *dx, int64_t n, cudaStream_t stream);

/// Batch normalization over [n, c, s] (s = spatial size).
struct BnParams {
  int64_t n = 0, c = 0, s = 1;
  float eps = 1e-5f, momentum = 0.9f;
};
/// Training: y, batch mean and inv std (into `mean`/`invStd`, c floats
/// each), running stats updated from runMean/runVar into newMean/newVar
/// (may alias; null to skip; the variance is the unbiased estimate).
void launchBnTrain(const BnParams &p, const float *x, const float *scale,
                   const float *bias, const float *runMean, const float *runVar,
                   float *y, float *newMean, float *newVar, float *mean,
                   float *invStd, cudaStream_t stream);
/// Inference with running statistics.
void launchBnInfer(const BnParams &p, const float *x, const float *scale,
                   const float *bias, const float *mean, const float *var,
                   float *y, cudaStream_t stream);
/// dY, X, scale, saved mean, saved inv std -> dX, dScale, dBias.
void launchBnGrad(const BnParams &p, const float *dy, const float *x,
                  const float *scale, const float *mean, const float *invStd,
                  float *dx, float *dScale, float *dBias, cudaStream_t stream);

/// One optimizer update (Executor.cpp's hostUpdate rules, float arithmetic):
/// p, g[, v[, h]] -> np[, nv[, nh]]; `t` earlier updates.
void launchUpdate(const UpdateRule &rule, int64_t t, int64_t n, const float *p,
                  const float *g, const float *v, const float *h, float *np,
                  float *nv, float *nh, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// The pointwise family (CudaPointwise.cu)
//===----------------------------------------------------------------------===//

/// y = f(x) in f32 arithmetic (KernelMath.h); `a`, `b` are the attributes
/// (alpha, beta) where used, Clip's bounds for UnaryOp::Clip.
void launchUnary(UnaryOp op, FloatPtr x, FloatPtr y, int64_t n, float a,
                 float b, cudaStream_t stream);
/// dX = f'(dY, z) (GradOp, KernelMath.h); ClipGrad's bounds in a and b.
void launchGrad(GradOp op, FloatPtr dy, FloatPtr z, FloatPtr dx, int64_t n,
                float a, float b, cudaStream_t stream);
/// Comparisons and logic of two broadcast operands of type `in` -> bool.
void launchCompare(CmpOp op, DType in, const Broadcast &b, uint8_t *y,
                   int64_t n, cudaStream_t stream);
void launchNot(const uint8_t *x, uint8_t *y, int64_t n, cudaStream_t stream);
/// y = x0 ? x1 : x2 (broadcast; elements of `elem` bytes).
void launchWhere(const Broadcast &b, size_t elem, void *y, int64_t n,
                 cudaStream_t stream);
void launchCast(DType from, DType to, const void *x, void *y, int64_t n,
                cudaStream_t stream);
/// ConstantOfShape.
void launchFill(DType t, void *y, int64_t n, double value, cudaStream_t stream);
/// Range: start and delta are one element of `t` in device memory.
void launchRange(DType t, const void *start, const void *delta, void *y,
                 int64_t n, cudaStream_t stream);
/// Trilu over [.., rows, cols]; `k` one i64 in device memory or null (0).
void launchTrilu(const void *x, void *y, size_t elem, int64_t rows,
                 int64_t cols, int64_t n, const int64_t *k, bool upper,
                 cudaStream_t stream);
/// y[o] = x[sum_d coord_d(o) * inStrides[d]] over the result's dims. When
/// `tileRows` > 0 the permutation is also a batch of matrix transposes,
/// x as [tileBatch, tileRows, tileCols] to y as [tileBatch, tileCols,
/// tileRows], which runs in 32x32 tiles through shared memory.
struct TransposeParams {
  int rank = 0;
  int64_t outDims[kMaxRank] = {}, inStrides[kMaxRank] = {};
  int64_t tileBatch = 0, tileRows = 0, tileCols = 0;
};
void launchTranspose(const TransposeParams &p, const void *x, void *y,
                     size_t elem, int64_t n, cudaStream_t stream);
/// ScatterND: y (already a copy of data) gets update slices at the index
/// tuples (geometry from OpGeometry's scatterNDGeom).
/// CumSum along [outer, n, inner] lines (f32 or i64), one thread a line.
void launchCumSum(const CumSumGeom &g, const void *x, void *y, bool i64,
                  cudaStream_t stream);
/// GatherElements (`updates` null: y[i] = data[offset(i)]) or
/// ScatterElements (y, already a copy of data, gets updates[i] written or,
/// with g.add, added atomically at offset(i)). Indices outside the axis are
/// skipped (the CPU backend stops there; constant ones are refused at load).
void launchElements(const ElementsGeom &g, const void *data,
                    const void *indices, const void *updates, void *y,
                    size_t elem, cudaStream_t stream);
void launchScatterND(const ScatterNDGeom &g, const int64_t *indices,
                     const void *updates, void *y, size_t elem,
                     cudaStream_t stream);
/// Selection by index (IndexKernels.cpp), one thread per line or result
/// element: ArgMax/ArgMin, TopK (k passes over each line), OneHot (`values`
/// the two [off, on] elements in device memory), GatherND (an outside index
/// gives zeros: the CPU backend stops there).
void launchArg(const ArgGeom &g, const float *x, int64_t *y,
               cudaStream_t stream);
void launchTopK(const TopKGeom &g, const float *x, float *values,
                int64_t *indices, cudaStream_t stream);
void launchOneHot(const OneHotGeom &g, const void *indices, const void *values,
                  void *y, size_t elem, cudaStream_t stream);
void launchGatherND(const ScatterNDGeom &g, const void *data,
                    const int64_t *indices, void *y, size_t elem,
                    cudaStream_t stream);
/// Data viewed as [outer, axisDim, inner]; `count` indices.
struct GatherParams {
  int64_t outer = 1, axisDim = 1, inner = 1, count = 1;
};
void launchGather(const GatherParams &p, const void *data, const void *indices,
                  bool i64, void *y, size_t elem, int64_t n,
                  cudaStream_t stream);
/// dX (dxNumel floats, zeroed first) += dY scattered (atomicAdd).
void launchGatherGrad(const GatherParams &p, const float *dy,
                      const void *indices, bool i64, float *dx, int64_t dxNumel,
                      int64_t n, cudaStream_t stream);
/// Softmax rows: [outer, axis, inner].
struct RowParams {
  int64_t outer = 1, axis = 1, inner = 1;
};
/// GatherGrad whose indices are distinct (no dX element gets two dY
/// elements): dX zeroed, then stores; f32 or bf16.
void launchGatherGradUnique(const GatherParams &p, FloatPtr dy,
                            const void *indices, bool i64, FloatPtr dx,
                            int64_t dxBytes, int64_t n, cudaStream_t stream);
/// Softmax over the axis: one warp per row when the axis is innermost, else
/// one thread per row; f32 sums in a fixed order.
void launchSoftmax(const RowParams &p, FloatPtr x, FloatPtr y, bool logForm,
                   cudaStream_t stream);
void launchSoftmaxGrad(const RowParams &p, FloatPtr dy, FloatPtr y, FloatPtr dx,
                       bool logForm, cudaStream_t stream);
/// FusedAttention's mask on `count` batch indices of f32 scores [count, m,
/// n] from index `first`: -inf where mask[maskOffset[b] + i * rowStride +
/// j * colStride] (maskOffset on the device, one per batch index).
void launchAttentionMask(float *scores, int64_t count, int64_t first, int64_t m,
                         int64_t n, const uint8_t *mask,
                         const int64_t *maskOffset, int64_t rowStride,
                         int64_t colStride, cudaStream_t stream);
/// LayerNormalization over the last `cols` elements of `rows` rows, one
/// block per row; the statistics are f32.
void launchLayerNorm(int64_t rows, int64_t cols, float eps, FloatPtr x,
                     FloatPtr scale, FloatPtr bias, FloatPtr y, float *mean,
                     float *invStd, cudaStream_t stream);
/// dX one block per row; dScale/dB 32 columns per block, rows in a fixed
/// order. Null results are skipped.
void launchLayerNormGrad(int64_t rows, int64_t cols, FloatPtr dy, FloatPtr x,
                         FloatPtr scale, const float *mean, const float *invStd,
                         FloatPtr dx, FloatPtr dScale, FloatPtr dBias,
                         cudaStream_t stream);

} // namespace oasr::rt::cuda

#endif // OASR_RUNTIME_CUDA_CUDAKERNELS_H
