//===- CudaKernels.cu - Hand-written CUDA kernels -------------------------===//
//
// The device code of the CUDA backend that is not cuBLAS or cuDNN, nor in
// CudaPointwise.cu: broadcast arithmetic and reductions
// (ArithmeticKernels.cpp), Relu (PointwiseKernels.cpp), softmax
// cross-entropy (LossKernels.cpp), max and average pooling
// (PoolKernels.cpp), Pad, Slice and Resize (ShapeKernels.cpp), Dropout
// (DropoutKernels.cpp), batch normalization (NormKernels.cpp) and the
// optimizer updates. Every kernel follows the CPU backend's definition of
// its op (runtime/cpu); the reductions run in a fixed order (one block per
// result, a tree in shared memory), so results do not depend on scheduling
// and runs repeat bitwise.
//
//===----------------------------------------------------------------------===//

#include "CudaGrid.h"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace oasr::rt::cuda {
namespace {

/// `op` folded over the block as a tree (blockDim.x a power of two <=
/// kThreads); every thread gets the result.
template <typename T, typename Op> __device__ T blockReduce(T v, Op op) {
  __shared__ T sh[kThreads];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  T r = sh[0];
  __syncthreads();
  return r;
}

struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ double blockSum(double v) { return blockReduce(v, SumOp()); }
__device__ float blockMax(float v) { return blockReduce(v, MaxOp()); }

//===----------------------------------------------------------------------===//
// Broadcast arithmetic
//===----------------------------------------------------------------------===//

/// Element offsets of every operand for result element `i`, in index type
/// I (32-bit division is several times faster than 64-bit on the GPU).
template <typename I = int64_t>
__device__ void offsetsOf(const Broadcast &b, I i, I *offs) {
  for (int j = 0; j < b.operands; ++j)
    offs[j] = 0;
  for (int d = b.rank - 1; d >= 0; --d) {
    I c = i % I(b.dims[d]);
    i /= I(b.dims[d]);
    for (int j = 0; j < b.operands; ++j)
      offs[j] += c * I(b.strides[j][d]);
  }
}

/// Elements of type T computed in M (bf16 in f32, as every 16-bit op).
template <typename T> struct MathOf { using type = T; };
template <> struct MathOf<__nv_bfloat16> { using type = float; };
template <typename T> __device__ T fromMath(typename MathOf<T>::type v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return v;
}

/// Operand j's element `off` in the arithmetic type of result type T: f32
/// and bf16 results read f32 or bf16 operands (Broadcast::bf16).
template <typename T>
__device__ typename MathOf<T>::type operandAt(const Broadcast &b, int j,
                                              int64_t off) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<const T *>(b.x[j])[off];
  else
    return loadF(FloatPtr{const_cast<void *>(b.x[j]), b.bf16[j]}, off);
}

template <typename T, typename I>
__global__ void naryKernel(Broadcast b, BinOp op, T *y, int64_t n) {
  using M = typename MathOf<T>::type;
  OASR_GRID_LOOP(i, n) {
    I offs[kMaxOperands];
    offsetsOf<I>(b, I(i), offs);
    M acc = operandAt<T>(b, 0, offs[0]);
    for (int j = 1; j < b.operands; ++j)
      acc = applyBinary<M>(op, acc, operandAt<T>(b, j, offs[j]));
    y[i] = fromMath<T>(acc);
  }
}

/// naryKernel where every operand has the result's shape: no offsets.
template <typename T>
__global__ void naryDenseKernel(Broadcast b, BinOp op, T *y, int64_t n) {
  using M = typename MathOf<T>::type;
  OASR_GRID_LOOP(i, n) {
    M acc = operandAt<T>(b, 0, i);
    for (int j = 1; j < b.operands; ++j)
      acc = applyBinary<M>(op, acc, operandAt<T>(b, j, i));
    y[i] = fromMath<T>(acc);
  }
}

/// True when every operand of `b` is laid out as the result (no broadcast).
bool denseOperands(const Broadcast &b) {
  for (int j = 0; j < b.operands; ++j) {
    int64_t stride = 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      if (b.dims[d] != 1 && b.strides[j][d] != stride)
        return false;
      stride *= b.dims[d];
    }
  }
  return true;
}

/// `b` with adjacent dimensions merged where every operand steps through
/// them alike (kept contiguously, or broadcast), and size-1 dimensions
/// dropped: a bias added to [N, L, C] becomes [N * L, C], two divisions an
/// element instead of three.
Broadcast collapsed(Broadcast b) {
  int r = 0;
  for (int d = 0; d < b.rank; ++d) {
    if (b.dims[d] == 1 && b.rank > 1)
      continue;
    bool merge = r > 0;
    for (int j = 0; j < b.operands && merge; ++j)
      merge = b.strides[j][r - 1] == b.strides[j][d] * b.dims[d];
    if (merge) {
      b.dims[r - 1] *= b.dims[d];
      for (int j = 0; j < b.operands; ++j)
        b.strides[j][r - 1] = b.strides[j][d];
      continue;
    }
    b.dims[r] = b.dims[d];
    for (int j = 0; j < b.operands; ++j)
      b.strides[j][r] = b.strides[j][d];
    ++r;
  }
  if (r == 0) { // every dimension 1: one element
    b.dims[0] = 1;
    for (int j = 0; j < b.operands; ++j)
      b.strides[j][0] = 0;
    r = 1;
  }
  b.rank = r;
  return b;
}

template <typename T>
void launchNaryOf(const Broadcast &full, BinOp op, void *y, int64_t n,
                  cudaStream_t stream) {
  T *yt = static_cast<T *>(y);
  if (denseOperands(full)) {
    naryDenseKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(full, op, yt, n);
    return;
  }
  Broadcast b = collapsed(full);
  if (n <= int64_t(UINT32_MAX))
    naryKernel<T, uint32_t>
        <<<blocksFor(n), kThreads, 0, stream>>>(b, op, yt, n);
  else
    naryKernel<T, int64_t><<<blocksFor(n), kThreads, 0, stream>>>(b, op, yt, n);
}

__global__ void expandKernel(Broadcast b, float scale, float *y, int64_t n) {
  OASR_GRID_LOOP(i, n) {
    int64_t offs[kMaxOperands];
    offsetsOf(b, i, offs);
    y[i] = scale * static_cast<const float *>(b.x[0])[offs[0]];
  }
}

/// One block per result element.
__global__ void reduceKernel(Reduction r, FloatPtr x, float scale, FloatPtr y) {
  int64_t o = blockIdx.x, base = 0;
  for (int d = r.outRank - 1; d >= 0; --d) {
    base += (o % r.outDims[d]) * r.outStrides[d];
    o /= r.outDims[d];
  }
  double acc = 0;
  for (int64_t i = threadIdx.x; i < r.inner; i += blockDim.x) {
    int64_t k = i, off = base;
    for (int d = r.redRank - 1; d >= 0; --d) {
      off += (k % r.redDims[d]) * r.redStrides[d];
      k /= r.redDims[d];
    }
    acc += double(loadF(x, off));
  }
  acc = blockSum(acc);
  if (threadIdx.x == 0)
    storeF(y, blockIdx.x, scale * float(acc));
}

__global__ void reduceExtremeKernel(Reduction r, const float *x, float *y,
                                    bool max) {
  int64_t o = blockIdx.x, base = 0;
  for (int d = r.outRank - 1; d >= 0; --d) {
    base += (o % r.outDims[d]) * r.outStrides[d];
    o /= r.outDims[d];
  }
  float best = -INFINITY, nan = 0;
  for (int64_t i = threadIdx.x; i < r.inner; i += blockDim.x) {
    int64_t k = i, off = base;
    for (int d = r.redRank - 1; d >= 0; --d) {
      off += (k % r.redDims[d]) * r.redStrides[d];
      k /= r.redDims[d];
    }
    float v = x[off];
    if (v != v)
      nan = 1;
    else
      best = fmaxf(best, max ? v : -v);
  }
  best = blockMax(best);
  nan = blockMax(nan);
  if (threadIdx.x == 0)
    y[blockIdx.x] = nan > 0 ? NAN : (max ? best : -best);
}

__global__ void reduceProdKernel(Reduction r, const float *x, float *y,
                                 int64_t outputs) {
  OASR_GRID_LOOP(o, outputs) {
    int64_t rem = o, base = 0;
    for (int d = r.outRank - 1; d >= 0; --d) {
      base += (rem % r.outDims[d]) * r.outStrides[d];
      rem /= r.outDims[d];
    }
    float acc = 1.0f;
    for (int64_t i = 0; i < r.inner; ++i) {
      int64_t k = i, off = base;
      for (int d = r.redRank - 1; d >= 0; --d) {
        off += (k % r.redDims[d]) * r.redStrides[d];
        k /= r.redDims[d];
      }
      acc *= x[off];
    }
    y[o] = acc;
  }
}

/// A block of 32x32 threads per 32 columns: thread (x, y) sums rows y,
/// y + 32, ...; then the 32 partial sums of each column in order.
__global__ void sumRowsKernel(int64_t rows, int64_t cols, FloatPtr x,
                              FloatPtr y) {
  __shared__ float part[32][33];
  int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 32)
      acc += loadF(x, r * cols + c);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols)
    return;
  acc = 0;
  for (int k = 0; k < 32; ++k)
    acc += part[k][threadIdx.x];
  storeF(y, c, acc);
}

template <typename T> __global__ void negKernel(const T *x, T *y, int64_t n) {
  OASR_GRID_LOOP(i, n) { y[i] = -x[i]; }
}

template <typename T> __global__ void reluKernel(const T *x, T *y, int64_t n) {
  const T zero = T(0.0f);
  OASR_GRID_LOOP(i, n) { y[i] = float(x[i]) > 0.0f ? x[i] : zero; }
}

template <typename T>
__global__ void reluGradKernel(const T *dy, const T *y, T *dx, int64_t n) {
  const T zero = T(0.0f);
  OASR_GRID_LOOP(i, n) { dx[i] = float(y[i]) > 0.0f ? dy[i] : zero; }
}

//===----------------------------------------------------------------------===//
// Softmax cross-entropy
//===----------------------------------------------------------------------===//

/// One block per row (sample, trailing position).
__global__ void sceRowKernel(SceGeom p, const float *x, const void *labels,
                             float *lp, float *rowLoss, int *rowCount,
                             float *lossNone) {
  int64_t r = blockIdx.x, ni = r / p.d, di = r % p.d;
  const float *xr = x + ni * p.c * p.d + di;
  float *lr = lp + ni * p.c * p.d + di;
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < p.c; c += blockDim.x)
    mx = fmaxf(mx, xr[c * p.d]);
  mx = blockMax(mx);
  double s = 0;
  for (int64_t c = threadIdx.x; c < p.c; c += blockDim.x)
    s += exp(double(xr[c * p.d] - mx));
  s = blockSum(s);
  float lse = mx + float(log(s));
  double lpSum = 0;
  for (int64_t c = threadIdx.x; c < p.c; c += blockDim.x) {
    lr[c * p.d] = xr[c * p.d] - lse;
    lpSum += double(xr[c * p.d] - lse);
  }
  if (p.labelSmoothing > 0)
    lpSum = blockSum(lpSum);
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  int64_t lab = indexAt(labels, p.labels64, r);
  float loss = 0;
  int counted = 0;
  // Labels outside [0, C) count as ignored (the CPU backend stops there).
  if (!(p.hasIgnore && lab == p.ignoreIndex) && lab >= 0 && lab < p.c) {
    loss = sceLossAt(lr[lab * p.d], lpSum, p.labelSmoothing, p.c);
    counted = 1;
  }
  rowLoss[r] = loss;
  rowCount[r] = counted;
  if (lossNone)
    lossNone[r] = loss;
}

/// One block: the mean or sum of the row losses.
__global__ void sceTotalKernel(SceGeom p, const float *rowLoss,
                               const int *rowCount, float *loss) {
  int64_t rows = p.n * p.d;
  double total = 0, count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += double(rowLoss[r]);
    count += double(rowCount[r]);
  }
  total = blockSum(total);
  count = blockSum(count);
  if (threadIdx.x == 0) {
    if (p.reduction == SceReduction::Mean)
      total = count > 0 ? total / count : 0.0;
    loss[0] = float(total);
  }
}

__global__ void sceCountKernel(SceGeom p, const void *labels, int *count) {
  int64_t rows = p.n * p.d;
  double c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    c += !(p.hasIgnore && indexAt(labels, p.labels64, r) == p.ignoreIndex);
  c = blockSum(c);
  if (threadIdx.x == 0)
    count[0] = int(c);
}

__global__ void sceGradKernel(SceGeom p, const float *dl, const float *lp,
                              const void *labels, float *dx, const int *count) {
  int64_t total = p.n * p.c * p.d;
  OASR_GRID_LOOP(e, total) {
    int64_t ni = e / (p.c * p.d), rem = e % (p.c * p.d);
    int64_t c = rem / p.d, di = rem % p.d, r = ni * p.d + di;
    int64_t lab = indexAt(labels, p.labels64, r);
    if (p.hasIgnore && lab == p.ignoreIndex) {
      dx[e] = 0.0f;
      continue;
    }
    float s;
    if (p.reduction == SceReduction::None)
      s = dl[r];
    else if (p.reduction == SceReduction::Mean)
      s = count[0] ? dl[0] / float(count[0]) : 0.0f;
    else
      s = dl[0];
    dx[e] = sceGradAt(lp[e], c == lab, s, p.labelSmoothing, p.c);
  }
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

__global__ void maxPoolKernel(Pool2D p, const float *x, float *y,
                              int64_t *indices) {
  int64_t total = p.planes * p.oh * p.ow;
  OASR_GRID_LOOP(o, total) {
    int64_t pl = o / (p.oh * p.ow), rem = o % (p.oh * p.ow);
    int64_t oy = rem / p.ow, ox = rem % p.ow;
    float best;
    int64_t bestIdx;
    maxPoolAt(p, x + pl * p.ih * p.iw, oy, ox, best, bestIdx);
    y[o] = best;
    if (indices)
      indices[o] = bestIdx;
  }
}

__global__ void maxPoolGradKernel(int64_t planes, int64_t inPlane,
                                  int64_t outPlane, const float *dy,
                                  const int64_t *ind, float *dx) {
  OASR_GRID_LOOP(p, planes) {
    float *dxp = dx + p * inPlane;
    for (int64_t i = 0; i < inPlane; ++i)
      dxp[i] = 0.0f;
    const float *dyp = dy + p * outPlane;
    const int64_t *ip = ind + p * outPlane;
    for (int64_t i = 0; i < outPlane; ++i)
      if (ip[i] >= 0 && ip[i] < inPlane)
        dxp[ip[i]] += dyp[i];
  }
}

/// dX one thread per element: the dY elements whose window's maximum it
/// was, found through the forward's geometry, summed in output order.
__global__ void maxPoolGradGatherKernel(Pool2D p, const float *dy,
                                        const int64_t *ind, float *dx) {
  int64_t inPlane = p.ih * p.iw, outPlane = p.oh * p.ow;
  int64_t total = p.planes * inPlane;
  OASR_GRID_LOOP(i, total) {
    int64_t pl = i / inPlane, pos = i % inPlane;
    int64_t iy = pos / p.iw, ix = pos % p.iw;
    float acc = 0.0f;
    for (int64_t ky = p.kh - 1; ky >= 0; --ky) {
      int64_t ty = iy + p.ph - ky * p.dh;
      if (ty < 0 || ty % p.sh || ty / p.sh >= p.oh)
        continue;
      for (int64_t kx = p.kw - 1; kx >= 0; --kx) {
        int64_t tx = ix + p.pw - kx * p.dw;
        if (tx < 0 || tx % p.sw || tx / p.sw >= p.ow)
          continue;
        int64_t o = pl * outPlane + (ty / p.sh) * p.ow + tx / p.sw;
        if (ind[o] == pos)
          acc += dy[o];
      }
    }
    dx[i] = acc;
  }
}

/// Elements averaged by output (oy, ox).
__device__ float avgDivisor(const Pool2D &p, int64_t oy, int64_t ox) {
  if (p.countIncludePad)
    return float(p.kh * p.kw);
  int64_t y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
  int64_t y1 = min(y0 + p.kh, p.ih), x1 = min(x0 + p.kw, p.iw);
  y0 = max(y0, int64_t(0));
  x0 = max(x0, int64_t(0));
  return float((y1 - y0) * (x1 - x0));
}

__global__ void avgPoolKernel(Pool2D p, const float *x, float *y) {
  int64_t total = p.planes * p.oh * p.ow;
  OASR_GRID_LOOP(o, total) {
    int64_t pl = o / (p.oh * p.ow), rem = o % (p.oh * p.ow);
    int64_t oy = rem / p.ow, ox = rem % p.ow;
    const float *xp = x + pl * p.ih * p.iw;
    float acc = 0.0f;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      int64_t iy = oy * p.sh - p.ph + ky;
      if (iy < 0 || iy >= p.ih)
        continue;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        int64_t ix = ox * p.sw - p.pw + kx;
        if (ix >= 0 && ix < p.iw)
          acc += xp[iy * p.iw + ix];
      }
    }
    y[o] = acc / avgDivisor(p, oy, ox);
  }
}

/// First output index whose window (stride s, left pad pad, size k) covers
/// input index i, and the last one, clipped to [0, outSize).
__device__ void windowsCovering(int64_t i, int64_t s, int64_t pad, int64_t k,
                                int64_t outSize, int64_t &lo, int64_t &hi) {
  int64_t first = i + pad - k + 1;
  lo = first <= 0 ? 0 : (first + s - 1) / s;
  hi = min((i + pad) / s, outSize - 1);
}

__global__ void avgPoolGradKernel(Pool2D p, const float *dy, float *dx) {
  int64_t total = p.planes * p.ih * p.iw;
  OASR_GRID_LOOP(e, total) {
    int64_t pl = e / (p.ih * p.iw), rem = e % (p.ih * p.iw);
    int64_t iy = rem / p.iw, ix = rem % p.iw;
    int64_t oy0, oy1, ox0, ox1;
    windowsCovering(iy, p.sh, p.ph, p.kh, p.oh, oy0, oy1);
    windowsCovering(ix, p.sw, p.pw, p.kw, p.ow, ox0, ox1);
    const float *dyp = dy + pl * p.oh * p.ow;
    float acc = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy)
      for (int64_t ox = ox0; ox <= ox1; ++ox)
        acc += dyp[oy * p.ow + ox] / avgDivisor(p, oy, ox);
    dx[e] = acc;
  }
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

__global__ void padKernel(PadParams p, const float *in, float *out, float value,
                          int64_t n) {
  OASR_GRID_LOOP(o, n) {
    int64_t rem = o, off = 0, stride = 1;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rem % p.outDims[d] - p.begin[d];
      rem /= p.outDims[d];
      if (c < 0 || c >= p.inDims[d])
        inside = false;
      off += c * stride;
      stride *= p.inDims[d];
    }
    out[o] = inside ? in[off] : value;
  }
}

//===----------------------------------------------------------------------===//
// Slice, Dropout
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void sliceKernel(SliceParams p, const T *in, T *out, int64_t n,
                            bool scatter) {
  OASR_GRID_LOOP(o, n) {
    int64_t rem = o, off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      off += (p.start[d] + (rem % p.outDims[d]) * p.step[d]) * p.inStrides[d];
      rem /= p.outDims[d];
    }
    if (scatter)
      const_cast<T *>(in)[off] = out[o];
    else
      out[o] = in[off];
  }
}

__global__ void resizeKernel(ResizeParams p, const float *x, float *y,
                             int64_t n) {
  OASR_GRID_LOOP(i, n) {
    int64_t ox = i % p.outW, t = i / p.outW, oy = t % p.outH,
            plane = t / p.outH;
    const float *xp = x + plane * p.inH * p.inW;
    float acc = 0;
    for (int ty = 0; ty < p.tapsH; ++ty)
      for (int tx = 0; tx < p.tapsW; ++tx)
        acc += p.hWeight[oy * p.tapsH + ty] * p.wWeight[ox * p.tapsW + tx] *
               xp[p.hIndex[oy * p.tapsH + ty] * p.inW +
                  p.wIndex[ox * p.tapsW + tx]];
    y[i] = acc;
  }
}

__global__ void resizeGradKernel(ResizeParams p, const float *dy, float *dx,
                                 int64_t n) {
  OASR_GRID_LOOP(i, n) {
    int64_t ix = i % p.inW, t = i / p.inW, iy = t % p.inH, plane = t / p.inH;
    const float *g = dy + plane * p.outH * p.outW;
    float acc = 0;
    for (int64_t a = p.hStart[iy]; a < p.hStart[iy + 1]; ++a)
      for (int64_t b = p.wStart[ix]; b < p.wStart[ix + 1]; ++b)
        acc += p.hInvWeight[a] * p.wInvWeight[b] *
               g[p.hOut[a] * p.outW + p.wOut[b]];
    dx[i] = acc;
  }
}

__global__ void dropoutKernel(uint64_t key, uint64_t threshold, float scale,
                              const float *x, float *y, uint8_t *mask,
                              int64_t n) {
  OASR_GRID_LOOP(i, n) {
    bool keep = dropoutKeeps(key, uint64_t(i), threshold);
    y[i] = dropoutValue(keep, x, i, scale);
    if (mask)
      mask[i] = keep;
  }
}

__global__ void dropoutGradKernel(float scale, const float *dy,
                                  const uint8_t *mask, float *dx, int64_t n) {
  OASR_GRID_LOOP(i, n) { dx[i] = dropoutValue(mask[i], dy, i, scale); }
}

//===----------------------------------------------------------------------===//
// Batch normalization (one block per channel)
//===----------------------------------------------------------------------===//

__device__ int64_t bnOffset(const BnParams &p, int64_t ch, int64_t k) {
  return ((k / p.s) * p.c + ch) * p.s + k % p.s;
}

__global__ void bnTrainKernel(BnParams p, const float *x, const float *scale,
                              const float *bias, const float *runMean,
                              const float *runVar, float *y, float *newMean,
                              float *newVar, float *mean, float *invStd) {
  int64_t ch = blockIdx.x, m = p.n * p.s;
  double sum = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x)
    sum += double(x[bnOffset(p, ch, k)]);
  float mu = float(blockSum(sum) / double(m));
  double sq = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    double d = double(x[bnOffset(p, ch, k)]) - double(mu);
    sq += d * d;
  }
  float var = float(blockSum(sq) / double(m));
  float inv = 1.0f / sqrtf(var + p.eps);
  float a = scale[ch] * inv, b = bias[ch] - mu * a;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    int64_t off = bnOffset(p, ch, k);
    y[off] = x[off] * a + b;
  }
  if (threadIdx.x != 0)
    return;
  // PyTorch updates the running variance with the unbiased estimate.
  float unbias = m > 1 ? float(m) / float(m - 1) : 1.0f;
  float rm = runMean[ch], rv = runVar[ch];
  if (newMean)
    newMean[ch] = p.momentum * rm + (1 - p.momentum) * mu;
  if (newVar)
    newVar[ch] = p.momentum * rv + (1 - p.momentum) * var * unbias;
  if (mean)
    mean[ch] = mu;
  if (invStd)
    invStd[ch] = inv;
}

__global__ void bnInferKernel(BnParams p, const float *x, const float *scale,
                              const float *bias, const float *mean,
                              const float *var, float *y) {
  int64_t total = p.n * p.c * p.s;
  OASR_GRID_LOOP(e, total) {
    int64_t ch = (e / p.s) % p.c;
    float inv = 1.0f / sqrtf(var[ch] + p.eps);
    y[e] = (x[e] - mean[ch]) * inv * scale[ch] + bias[ch];
  }
}

__global__ void bnGradKernel(BnParams p, const float *dy, const float *x,
                             const float *scale, const float *mean,
                             const float *invStd, float *dx, float *dScale,
                             float *dBias) {
  int64_t ch = blockIdx.x, m = p.n * p.s;
  float mu = mean[ch], inv = invStd[ch];
  double sdy = 0, sdyx = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    int64_t off = bnOffset(p, ch, k);
    double g = double(dy[off]);
    sdy += g;
    sdyx += g * double((x[off] - mu) * inv);
  }
  sdy = blockSum(sdy);
  sdyx = blockSum(sdyx);
  float meanDy = float(sdy / double(m)), meanDyX = float(sdyx / double(m));
  float a = scale[ch] * inv;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    int64_t off = bnOffset(p, ch, k);
    float xhat = (x[off] - mu) * inv;
    dx[off] = a * (dy[off] - meanDy - xhat * meanDyX);
  }
  if (threadIdx.x != 0)
    return;
  if (dScale)
    dScale[ch] = float(sdyx);
  if (dBias)
    dBias[ch] = float(sdy);
}

//===----------------------------------------------------------------------===//
// Optimizer updates (Executor.cpp's hostUpdate, element by element)
//===----------------------------------------------------------------------===//

__global__ void updateKernel(UpdateScalars u, int64_t n, const float *p,
                             const float *g, const float *v, const float *h,
                             float *np, float *nv, float *nh) {
  OASR_GRID_LOOP(i, n) {
    float pi = p[i], gi = g[i];
    switch (u.algo) {
    case UpdateAlgo::Sgd:
      np[i] = sgdStep(u, pi, gi);
      break;
    case UpdateAlgo::Momentum:
      momentumStep(u, pi, gi, v[i], np[i], nv[i]);
      break;
    case UpdateAlgo::Adagrad:
      adagradStep(u, pi, gi, v[i], np[i], nv[i]);
      break;
    case UpdateAlgo::Adam:
      adamStep(u, pi, gi, v[i], h[i], np[i], nv[i], nh[i]);
      break;
    case UpdateAlgo::AdamW:
      adamwStep(u, pi, gi, v[i], h[i], np[i], nv[i], nh[i]);
      break;
    }
  }
}

} // namespace

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    fatalKernelError(std::string(what) + ": " + cudaGetErrorString(status) +
                     " (" + cudaGetErrorName(status) + ")");
}

void launchNary(const Broadcast &b, BinOp op, DType dtype, void *y, int64_t n,
                cudaStream_t stream) {
  switch (dtype) {
  case DType::F32:
    launchNaryOf<float>(b, op, y, n, stream);
    break;
  case DType::BF16:
    launchNaryOf<__nv_bfloat16>(b, op, y, n, stream);
    break;
  case DType::I64:
    launchNaryOf<int64_t>(b, op, y, n, stream);
    break;
  case DType::I32:
    launchNaryOf<int32_t>(b, op, y, n, stream);
    break;
  default:
    return;
  }
  launched("broadcast arithmetic");
}

void launchExpand(const Broadcast &b, float scale, float *y, int64_t n,
                  cudaStream_t stream) {
  expandKernel<<<blocksFor(n), kThreads, 0, stream>>>(b, scale, y, n);
  launched("expand");
}

void launchReduceExtreme(const Reduction &r, const float *x, float *y,
                         int64_t outputs, bool max, cudaStream_t stream) {
  if (outputs <= 0)
    return;
  unsigned threads = r.inner >= 256 ? 256 : r.inner >= 64 ? 64 : 32;
  reduceExtremeKernel<<<unsigned(outputs), threads, 0, stream>>>(r, x, y, max);
  launched("reduction");
}

void launchReduceProd(const Reduction &r, const float *x, float *y,
                      int64_t outputs, cudaStream_t stream) {
  if (outputs <= 0)
    return;
  reduceProdKernel<<<blocksFor(outputs), kThreads, 0, stream>>>(r, x, y,
                                                                outputs);
  launched("ReduceProd");
}

void launchReduce(const Reduction &r, FloatPtr x, float scale, FloatPtr y,
                  int64_t outputs, cudaStream_t stream) {
  if (outputs <= 0)
    return;
  unsigned threads = r.inner >= 256 ? 256 : r.inner >= 64 ? 64 : 32;
  reduceKernel<<<unsigned(outputs), threads, 0, stream>>>(r, x, scale, y);
  launched("reduction");
}

void launchSumRows(int64_t rows, int64_t cols, FloatPtr x, FloatPtr y,
                   cudaStream_t stream) {
  sumRowsKernel<<<unsigned((cols + 31) / 32), dim3(32, 32), 0, stream>>>(
      rows, cols, x, y);
  launched("column sums");
}

void launchNeg(DType dtype, const void *x, void *y, int64_t n,
               cudaStream_t stream) {
  switch (dtype) {
  case DType::F32:
    negKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const float *>(x), static_cast<float *>(y), n);
    break;
  case DType::I64:
    negKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const int64_t *>(x), static_cast<int64_t *>(y), n);
    break;
  case DType::I32:
    negKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const int32_t *>(x), static_cast<int32_t *>(y), n);
    break;
  default:
    return;
  }
  launched("Neg");
}

void launchRelu(DType t, const void *x, void *y, int64_t n,
                cudaStream_t stream) {
  if (t == DType::BF16)
    reluKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(x), static_cast<__nv_bfloat16 *>(y),
        n);
  else
    reluKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const float *>(x), static_cast<float *>(y), n);
  launched("Relu");
}

void launchReluGrad(DType t, const void *dy, const void *y, void *dx, int64_t n,
                    cudaStream_t stream) {
  if (t == DType::BF16)
    reluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(dy),
        static_cast<const __nv_bfloat16 *>(y), static_cast<__nv_bfloat16 *>(dx),
        n);
  else
    reluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const float *>(dy), static_cast<const float *>(y),
        static_cast<float *>(dx), n);
  launched("ReluGrad");
}

void launchSce(const SceGeom &p, const float *scores, const void *labels,
               float *loss, float *logProb, float *rowLoss, int *rowCount,
               cudaStream_t stream) {
  int64_t rows = p.n * p.d;
  if (rows <= 0)
    return;
  sceRowKernel<<<unsigned(rows), 128, 0, stream>>>(
      p, scores, labels, logProb, rowLoss, rowCount,
      p.reduction == SceReduction::None ? loss : nullptr);
  if (p.reduction != SceReduction::None)
    sceTotalKernel<<<1, kThreads, 0, stream>>>(p, rowLoss, rowCount, loss);
  launched("SoftmaxCrossEntropyLoss");
}

void launchSceGrad(const SceGeom &p, const float *dLoss, const float *logProb,
                   const void *labels, float *dScores, int *count,
                   cudaStream_t stream) {
  sceCountKernel<<<1, kThreads, 0, stream>>>(p, labels, count);
  int64_t total = p.n * p.c * p.d;
  sceGradKernel<<<blocksFor(total), kThreads, 0, stream>>>(
      p, dLoss, logProb, labels, dScores, count);
  launched("SoftmaxCrossEntropyLossGrad");
}

void launchMaxPool(const Pool2D &p, const float *x, float *y, int64_t *indices,
                   cudaStream_t stream) {
  int64_t total = p.planes * p.oh * p.ow;
  maxPoolKernel<<<blocksFor(total), kThreads, 0, stream>>>(p, x, y, indices);
  launched("MaxPool");
}

void launchMaxPoolGrad(int64_t planes, int64_t inPlane, int64_t outPlane,
                       const float *dy, const int64_t *indices, float *dx,
                       cudaStream_t stream) {
  maxPoolGradKernel<<<blocksFor(planes), kThreads, 0, stream>>>(
      planes, inPlane, outPlane, dy, indices, dx);
  launched("MaxPoolGrad");
}

void launchMaxPoolGrad(const Pool2D &p, const float *dy, const int64_t *indices,
                       float *dx, cudaStream_t stream) {
  maxPoolGradGatherKernel<<<blocksFor(p.planes * p.ih * p.iw), kThreads, 0,
                            stream>>>(p, dy, indices, dx);
  launched("MaxPoolGrad");
}

void launchAvgPool(const Pool2D &p, const float *x, float *y,
                   cudaStream_t stream) {
  int64_t total = p.planes * p.oh * p.ow;
  avgPoolKernel<<<blocksFor(total), kThreads, 0, stream>>>(p, x, y);
  launched("AveragePool");
}

void launchAvgPoolGrad(const Pool2D &p, const float *dy, float *dx,
                       cudaStream_t stream) {
  int64_t total = p.planes * p.ih * p.iw;
  avgPoolGradKernel<<<blocksFor(total), kThreads, 0, stream>>>(p, dy, dx);
  launched("AveragePoolGrad");
}

void launchPad(const PadParams &p, const float *in, float *out, float value,
               int64_t n, cudaStream_t stream) {
  padKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, in, out, value, n);
  launched("Pad");
}

void launchSlice(const SliceParams &p, int elemBytes, const void *in, void *out,
                 int64_t n, bool scatter, cudaStream_t stream) {
  auto go = [&](auto tag) {
    using T = decltype(tag);
    sliceKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
        p, static_cast<const T *>(in), static_cast<T *>(out), n, scatter);
  };
  if (elemBytes == 8)
    go(uint64_t());
  else if (elemBytes == 4)
    go(uint32_t());
  else
    go(uint8_t());
  launched("Slice");
}

void launchResize(const ResizeParams &p, bool grad, const float *src,
                  float *dst, int64_t planes, cudaStream_t stream) {
  int64_t n = planes * (grad ? p.inH * p.inW : p.outH * p.outW);
  if (grad)
    resizeGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, src, dst, n);
  else
    resizeKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, src, dst, n);
  launched(grad ? "ResizeGrad" : "Resize");
}

void launchDropout(uint64_t stepKey, uint64_t threshold, float scale,
                   const float *x, float *y, uint8_t *mask, int64_t n,
                   cudaStream_t stream) {
  dropoutKernel<<<blocksFor(n), kThreads, 0, stream>>>(stepKey, threshold,
                                                       scale, x, y, mask, n);
  launched("Dropout");
}

void launchDropoutGrad(float scale, const float *dy, const uint8_t *mask,
                       float *dx, int64_t n, cudaStream_t stream) {
  dropoutGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(scale, dy, mask, dx,
                                                           n);
  launched("DropoutGrad");
}

void launchBnTrain(const BnParams &p, const float *x, const float *scale,
                   const float *bias, const float *runMean, const float *runVar,
                   float *y, float *newMean, float *newVar, float *mean,
                   float *invStd, cudaStream_t stream) {
  bnTrainKernel<<<unsigned(p.c), kThreads, 0, stream>>>(
      p, x, scale, bias, runMean, runVar, y, newMean, newVar, mean, invStd);
  launched("BatchNormalization");
}

void launchBnInfer(const BnParams &p, const float *x, const float *scale,
                   const float *bias, const float *mean, const float *var,
                   float *y, cudaStream_t stream) {
  int64_t total = p.n * p.c * p.s;
  bnInferKernel<<<blocksFor(total), kThreads, 0, stream>>>(p, x, scale, bias,
                                                           mean, var, y);
  launched("BatchNormalization");
}

void launchBnGrad(const BnParams &p, const float *dy, const float *x,
                  const float *scale, const float *mean, const float *invStd,
                  float *dx, float *dScale, float *dBias, cudaStream_t stream) {
  bnGradKernel<<<unsigned(p.c), kThreads, 0, stream>>>(
      p, dy, x, scale, mean, invStd, dx, dScale, dBias);
  launched("BatchNormalizationGrad");
}

void launchUpdate(const UpdateRule &rule, int64_t t, int64_t n, const float *p,
                  const float *g, const float *v, const float *h, float *np,
                  float *nv, float *nh, cudaStream_t stream) {
  UpdateScalars u = updateScalars(rule, t);
  updateKernel<<<blocksFor(n), kThreads, 0, stream>>>(u, n, p, g, v, h, np, nv,
                                                      nh);
  launched("optimizer update");
}

} // namespace oasr::rt::cuda
