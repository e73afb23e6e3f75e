//===- CudaPointwise.cu - Activations, comparisons, masks on the GPU ------===//
//
// Device code of the CUDA backend's elementwise and row-wise ops:
// activations and their gradients, comparisons, logic and Where with numpy
// broadcasting (PointwiseKernels.cpp), Cast (LowPrecision.cpp), the mask
// builders (ConstantOfShape, Range, Trilu), Transpose, ScatterND and
// Gather/GatherGrad (ShapeKernels.cpp), and softmax (PointwiseKernels.cpp)
// and layer normalization (NormKernels.cpp) with their gradients.
// One thread per result element (grid-stride loops) unless said otherwise;
// reductions run in a fixed order so results are deterministic, except
// GatherGrad, which accumulates repeated indices with atomicAdd.
//
//===----------------------------------------------------------------------===//

#include "CudaGrid.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

namespace oasr::rt::cuda {
namespace {

/// y = f(x): the activations both backends run from KernelMath.h, and
/// those the CPU takes from oneDNN (Abs to LeakyRelu) and Gelu, whose CPU
/// loop orders its products otherwise.
__device__ float unary(UnaryOp op, float x, float a, float b) {
  switch (op) {
  case UnaryOp::Abs:
    return fabsf(x);
  case UnaryOp::Sigmoid:
    return 1.0f / (1.0f + expf(-x));
  case UnaryOp::Tanh:
    return tanhf(x);
  case UnaryOp::Exp:
    return expf(x);
  case UnaryOp::Log:
    return logf(x);
  case UnaryOp::Sqrt:
    return sqrtf(x);
  case UnaryOp::Erf:
    return erff(x);
  case UnaryOp::Elu:
    return x > 0.0f ? x : a * (expf(x) - 1.0f);
  case UnaryOp::LeakyRelu:
    return x > 0.0f ? x : a * x;
  case UnaryOp::HardSigmoid:
    return hardSigmoid(x, a, b);
  case UnaryOp::HardSwish:
    return hardSwish(x);
  case UnaryOp::Mish:
    return mish(x);
  case UnaryOp::Reciprocal:
    return reciprocal(x);
  case UnaryOp::GeluErf:
    return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
  case UnaryOp::GeluTanh: {
    float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  }
  case UnaryOp::Clip:
    return clipValue(x, a, b);
  default:
    return sharedUnary(op, x, a, b);
  }
}

/// dX from dY and z (the forward result Y or input X, per op).
__device__ float grad(GradOp op, float dy, float z, float a, float b) {
  switch (op) {
  case GradOp::Sigmoid:
    return dy * z * (1.0f - z);
  case GradOp::Tanh:
    return dy * (1.0f - z * z);
  case GradOp::Elu:
    return z > 0.0f ? dy : dy * (z + a);
  case GradOp::LeakyRelu:
    return z > 0.0f ? dy : dy * a;
  case GradOp::HardSigmoid:
    return hardSigmoidGrad(dy, z, a, b);
  case GradOp::HardSwish:
    return hardSwishGrad(dy, z);
  case GradOp::Mish:
    return mishGrad(dy, z);
  case GradOp::GeluErf: {
    float cdf = 0.5f * (1.0f + erff(z * kInvSqrt2));
    float pdf = kInvSqrt2Pi * expf(-0.5f * z * z);
    return dy * (cdf + z * pdf);
  }
  case GradOp::GeluTanh: {
    float k = kSqrt2OverPi, z3 = z * z * z;
    float t = tanhf(k * (z + kGeluCubic * z3));
    float dt = (1.0f - t * t) * k * (1.0f + 3.0f * kGeluCubic * z * z);
    return dy * (0.5f * (1.0f + t) + 0.5f * z * dt);
  }
  case GradOp::Clip:
    return clipGrad(dy, z, a, b);
  }
  return 0.0f;
}

__global__ void unaryKernel(UnaryOp op, FloatPtr x, FloatPtr y, int64_t n,
                            float a, float b) {
  OASR_GRID_LOOP(i, n) { storeF(y, i, unary(op, loadF(x, i), a, b)); }
}

__global__ void gradKernel(GradOp op, FloatPtr dy, FloatPtr z, FloatPtr dx,
                           int64_t n, float a, float b) {
  OASR_GRID_LOOP(i, n) {
    storeF(dx, i, grad(op, loadF(dy, i), loadF(z, i), a, b));
  }
}

/// Element offset of operand j for result index i.
__device__ int64_t offsetOf(const Broadcast &b, int j, int64_t i) {
  int64_t off = 0;
  for (int d = b.rank - 1; d >= 0; --d) {
    int64_t c = i % b.dims[d];
    i /= b.dims[d];
    off += c * b.strides[j][d];
  }
  return off;
}

template <typename T>
__device__ bool compareAt(CmpOp op, const Broadcast &b, int64_t i) {
  T x = static_cast<const T *>(b.x[0])[offsetOf(b, 0, i)];
  T y = static_cast<const T *>(b.x[1])[offsetOf(b, 1, i)];
  return compareValues<T>(op, x, y);
}

template <typename T>
__global__ void compareKernel(CmpOp op, Broadcast b, uint8_t *y, int64_t n) {
  OASR_GRID_LOOP(i, n) { y[i] = compareAt<T>(op, b, i); }
}

__global__ void notKernel(const uint8_t *x, uint8_t *y, int64_t n) {
  OASR_GRID_LOOP(i, n) { y[i] = !x[i]; }
}

template <typename T>
__global__ void whereKernel(Broadcast b, T *y, int64_t n) {
  OASR_GRID_LOOP(i, n) {
    bool c = static_cast<const uint8_t *>(b.x[0])[offsetOf(b, 0, i)];
    y[i] = c ? static_cast<const T *>(b.x[1])[offsetOf(b, 1, i)]
             : static_cast<const T *>(b.x[2])[offsetOf(b, 2, i)];
  }
}

template <typename T> __device__ double loadAs(const void *p, int64_t i) {
  return double(static_cast<const T *>(p)[i]);
}

__device__ double load(DType t, const void *p, int64_t i) {
  switch (t) {
  case DType::F32:
    return loadAs<float>(p, i);
  case DType::I64:
    return loadAs<int64_t>(p, i);
  case DType::I32:
    return loadAs<int32_t>(p, i);
  case DType::Bool:
    return loadAs<uint8_t>(p, i) ? 1.0 : 0.0;
  case DType::BF16:
    return double(__bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]));
  case DType::F16:
    return double(__half2float(static_cast<const __half *>(p)[i]));
  default:
    return 0.0;
  }
}

__device__ void store(DType t, void *p, int64_t i, double v) {
  switch (t) {
  case DType::F32:
    static_cast<float *>(p)[i] = float(v);
    return;
  case DType::I64:
    static_cast<int64_t *>(p)[i] = int64_t(v);
    return;
  case DType::I32:
    static_cast<int32_t *>(p)[i] = int32_t(v);
    return;
  case DType::Bool:
    static_cast<uint8_t *>(p)[i] = v != 0.0;
    return;
  // From a double: exact for every f32, i32 and 16-bit source, so one
  // rounding (to nearest even) as the host conversions.
  case DType::BF16:
    static_cast<__nv_bfloat16 *>(p)[i] = __double2bfloat16(v);
    return;
  case DType::F16:
    static_cast<__half *>(p)[i] = __double2half(v);
    return;
  default:
    return;
  }
}

__global__ void castKernel(DType from, DType to, const void *x, void *y,
                           int64_t n) {
  OASR_GRID_LOOP(i, n) {
    double v = load(from, x, i);
    // Float to integer truncates toward zero, as the CPU kernel does.
    store(to, y, i, v);
  }
}

__global__ void fillKernel(DType t, void *y, int64_t n, double value) {
  OASR_GRID_LOOP(i, n) { store(t, y, i, value); }
}

__global__ void rangeKernel(DType t, const void *start, const void *delta,
                            void *y, int64_t n) {
  OASR_GRID_LOOP(i, n) {
    store(t, y, i, rangeValue(load(t, start, 0), load(t, delta, 0), i));
  }
}

__global__ void triluKernel(const char *x, char *y, size_t elem, int64_t rows,
                            int64_t cols, int64_t n, const int64_t *kPtr,
                            bool upper) {
  int64_t k = kPtr ? kPtr[0] : 0;
  OASR_GRID_LOOP(e, n) {
    int64_t j = e % cols, i = (e / cols) % rows;
    bool keep = triluKeeps(upper, i, j, k);
    for (size_t b = 0; b < elem; ++b)
      y[e * elem + b] = keep ? x[e * elem + b] : 0;
  }
}

/// One thread per updated element; tuples with equal indices race under
/// reduction "none" (ONNX leaves that order undefined), and reduce with
/// atomics otherwise. An index outside its dimension is skipped (the CPU
/// kernel stops with an error; a device check would cost a host sync).
__global__ void scatterNDKernel(ScatterNDGeom g, const int64_t *idx,
                                const char *upd, char *y, size_t elem) {
  OASR_GRID_LOOP(e, g.count * g.slice) {
    int64_t t = e / g.slice, j = e % g.slice;
    int64_t off = ndTupleOffset(g, idx, t);
    if (off < 0)
      continue;
    off += j;
    if (g.reduction == ScatterReduction::None) {
      for (size_t b = 0; b < elem; ++b)
        y[off * elem + b] = upd[e * elem + b];
      continue;
    }
    float u = reinterpret_cast<const float *>(upd)[e];
    float *v = reinterpret_cast<float *>(y) + off;
    switch (g.reduction) {
    case ScatterReduction::Add:
      atomicAdd(v, u);
      break;
    case ScatterReduction::Mul: {
      int *a = reinterpret_cast<int *>(v), old = *a, seen;
      do {
        seen = old;
        old = atomicCAS(a, seen, __float_as_int(__int_as_float(seen) * u));
      } while (seen != old);
      break;
    }
    case ScatterReduction::Max:
    case ScatterReduction::Min: {
      bool max = g.reduction == ScatterReduction::Max;
      int *a = reinterpret_cast<int *>(v), old = *a, seen;
      do {
        seen = old;
        float cur = __int_as_float(seen);
        float nxt = max ? fmaxf(cur, u) : fminf(cur, u);
        old = atomicCAS(a, seen, __float_as_int(nxt));
      } while (seen != old);
      break;
    }
    case ScatterReduction::None:
      break;
    }
  }
}

/// Elements of E (the element's bytes as one unsigned word); index
/// arithmetic in I.
template <typename E, typename I>
__global__ void transposeKernel(TransposeParams p, const E *x, E *y,
                                int64_t n) {
  OASR_GRID_LOOP(o, n) {
    I rem = I(o), off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      I c = rem % I(p.outDims[d]);
      rem /= I(p.outDims[d]);
      off += c * I(p.inStrides[d]);
    }
    y[o] = x[off];
  }
}

/// `p` with adjacent result dimensions merged where the operand holds them
/// contiguously too ([0, 2, 1, 3] of [N, L, H, D] keeps D whole).
TransposeParams collapsed(TransposeParams p) {
  int r = 0;
  for (int d = 0; d < p.rank; ++d) {
    if (p.outDims[d] == 1 && p.rank > 1)
      continue;
    if (r > 0 && p.inStrides[r - 1] == p.inStrides[d] * p.outDims[d]) {
      p.outDims[r - 1] *= p.outDims[d];
      p.inStrides[r - 1] = p.inStrides[d];
      continue;
    }
    p.outDims[r] = p.outDims[d];
    p.inStrides[r] = p.inStrides[d];
    ++r;
  }
  if (r == 0) {
    p.outDims[0] = 1;
    p.inStrides[0] = 0;
    r = 1;
  }
  p.rank = r;
  return p;
}

/// x [batch, R, C] -> y [batch, C, R], one 32x32 tile per block (32x8
/// threads): rows of the tile are read and written whole, so both sides
/// coalesce. Blocks: x over C's tiles, y over R's tiles, z over the batch.
constexpr int kTile = 32, kTileRows = 8;
template <typename E>
__global__ void transposeTileKernel(TransposeParams p, const E *x, E *y) {
  __shared__ E tile[kTile][kTile + 1];
  int64_t R = p.tileRows, C = p.tileCols;
  for (int64_t bz = blockIdx.z; bz < p.tileBatch; bz += gridDim.z) {
    const E *xb = x + bz * R * C;
    E *yb = y + bz * R * C;
    int64_t c = int64_t(blockIdx.x) * kTile + threadIdx.x;
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      int64_t r = int64_t(blockIdx.y) * kTile + k;
      if (r < R && c < C)
        tile[k][threadIdx.x] = xb[r * C + c];
    }
    __syncthreads();
    int64_t r = int64_t(blockIdx.y) * kTile + threadIdx.x;
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {
      int64_t cc = int64_t(blockIdx.x) * kTile + k;
      if (r < R && cc < C)
        yb[cc * R + r] = tile[threadIdx.x][k];
    }
    __syncthreads();
  }
}

template <typename E>
void launchTransposeOf(const TransposeParams &p, const void *x, void *y,
                       int64_t n, cudaStream_t s) {
  const E *xe = static_cast<const E *>(x);
  E *ye = static_cast<E *>(y);
  if (p.tileRows > 0) {
    dim3 grid(unsigned((p.tileCols + kTile - 1) / kTile),
              unsigned((p.tileRows + kTile - 1) / kTile),
              unsigned(p.tileBatch < 65535 ? p.tileBatch : 65535));
    transposeTileKernel<E><<<grid, dim3(kTile, kTileRows), 0, s>>>(p, xe, ye);
  } else if (n <= int64_t(UINT32_MAX)) {
    transposeKernel<E, uint32_t>
        <<<blocksFor(n), kThreads, 0, s>>>(p, xe, ye, n);
  } else {
    transposeKernel<E, int64_t><<<blocksFor(n), kThreads, 0, s>>>(p, xe, ye, n);
  }
}

/// Gather over [outer, axisDim, inner] with `count` indices: the data
/// element that result element `o` reads (negative indices from the end).
__device__ int64_t gatherSource(const GatherParams &p, const void *indices,
                                bool i64, int64_t o) {
  int64_t in = o % p.inner, k = (o / p.inner) % p.count,
          out = o / (p.inner * p.count);
  int64_t j = i64 ? static_cast<const int64_t *>(indices)[k]
                  : static_cast<const int32_t *>(indices)[k];
  if (j < 0)
    j += p.axisDim;
  return (out * p.axisDim + j) * p.inner + in;
}

__global__ void gatherKernel(GatherParams p, const char *data,
                             const void *indices, bool i64, char *y,
                             size_t elem, int64_t n) {
  OASR_GRID_LOOP(o, n) {
    int64_t src = gatherSource(p, indices, i64, o);
    for (size_t b = 0; b < elem; ++b)
      y[o * elem + b] = data[src * elem + b];
  }
}

__global__ void gatherGradKernel(GatherParams p, const float *dy,
                                 const void *indices, bool i64, float *dx,
                                 int64_t n) {
  OASR_GRID_LOOP(o, n) {
    atomicAdd(dx + gatherSource(p, indices, i64, o), dy[o]);
  }
}

/// GatherGrad whose indices are distinct: every dX element gets at most one
/// dY element, so plain stores (of f32 or bf16) in place of atomics.
__global__ void gatherGradUniqueKernel(GatherParams p, FloatPtr dy,
                                       const void *indices, bool i64,
                                       FloatPtr dx, int64_t n) {
  OASR_GRID_LOOP(o, n) {
    storeF(dx, gatherSource(p, indices, i64, o), loadF(dy, o));
  }
}

/// One thread per (outer, inner) row of the softmax axis (axis not
/// innermost).
__global__ void softmaxKernel(RowParams p, FloatPtr x, FloatPtr y, bool logForm,
                              int64_t rows) {
  OASR_GRID_LOOP(r, rows) {
    int64_t base = (r / p.inner) * p.axis * p.inner + r % p.inner;
    float m = -INFINITY;
    for (int64_t k = 0; k < p.axis; ++k)
      m = fmaxf(m, loadF(x, base + k * p.inner));
    float sum = 0;
    for (int64_t k = 0; k < p.axis; ++k)
      sum += expf(loadF(x, base + k * p.inner) - m);
    float ls = logf(sum);
    for (int64_t k = 0; k < p.axis; ++k) {
      float v = loadF(x, base + k * p.inner) - m;
      storeF(y, base + k * p.inner, logForm ? v - ls : expf(v) / sum);
    }
  }
}

/// One warp per row of an innermost softmax axis.
/// FusedAttention's mask: -inf at the masked scores (launchAttentionMask).
__global__ void attentionMaskKernel(float *s, int64_t total, int64_t first,
                                    int64_t m, int64_t n, const uint8_t *mask,
                                    const int64_t *maskOffset, int64_t rs,
                                    int64_t cs) {
  OASR_GRID_LOOP(idx, total) {
    int64_t j = idx % n, r = idx / n;
    int64_t b = first + r / m, i = r % m;
    if (mask[maskOffset[b] + i * rs + j * cs])
      s[idx] = -INFINITY;
  }
}

__global__ void softmaxRowKernel(int64_t rows, int64_t axis, FloatPtr x,
                                 FloatPtr y, bool logForm) {
  int lane = threadIdx.x & 31;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       r < rows; r += warps) {
    int64_t base = r * axis;
    float m = -INFINITY;
    for (int64_t k = lane; k < axis; k += 32)
      m = fmaxf(m, loadF(x, base + k));
    m = warpMax(m);
    float sum = 0;
    for (int64_t k = lane; k < axis; k += 32)
      sum += expf(loadF(x, base + k) - m);
    sum = warpSum2(sum, 0.0f).x;
    float ls = logf(sum);
    for (int64_t k = lane; k < axis; k += 32) {
      float v = loadF(x, base + k) - m;
      storeF(y, base + k, logForm ? v - ls : expf(v) / sum);
    }
  }
}

/// dX = Y * (dY - sum(dY * Y)) (softmax) or dY - exp(Y) * sum(dY) (log).
__device__ float softmaxGradAt(bool logForm, float dy, float y, float s) {
  return logForm ? dy - expf(y) * s : y * (dy - s);
}

__global__ void softmaxGradKernel(RowParams p, FloatPtr dy, FloatPtr y,
                                  FloatPtr dx, bool logForm, int64_t rows) {
  OASR_GRID_LOOP(r, rows) {
    int64_t base = (r / p.inner) * p.axis * p.inner + r % p.inner;
    float s = 0;
    for (int64_t k = 0; k < p.axis; ++k) {
      int64_t i = base + k * p.inner;
      s += logForm ? loadF(dy, i) : loadF(dy, i) * loadF(y, i);
    }
    for (int64_t k = 0; k < p.axis; ++k) {
      int64_t i = base + k * p.inner;
      storeF(dx, i, softmaxGradAt(logForm, loadF(dy, i), loadF(y, i), s));
    }
  }
}

__global__ void softmaxGradRowKernel(int64_t rows, int64_t axis, FloatPtr dy,
                                     FloatPtr y, FloatPtr dx, bool logForm) {
  int lane = threadIdx.x & 31;
  int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       r < rows; r += warps) {
    int64_t base = r * axis;
    float s = 0;
    for (int64_t k = lane; k < axis; k += 32)
      s += logForm ? loadF(dy, base + k)
                   : loadF(dy, base + k) * loadF(y, base + k);
    s = warpSum2(s, 0.0f).x;
    for (int64_t k = lane; k < axis; k += 32)
      storeF(
          dx, base + k,
          softmaxGradAt(logForm, loadF(dy, base + k), loadF(y, base + k), s));
  }
}

/// LayerNormalization of the rows of `x`, one block per row (grid-stride
/// over rows); mean, then the centred sum of squares.
__global__ void layerNormKernel(int64_t rows, int64_t cols, float eps,
                                FloatPtr x, FloatPtr scale, FloatPtr bias,
                                FloatPtr y, float *mean, float *invStd) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * cols;
    float s = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      s += loadF(x, base + c);
    float mu = blockSum2(s, 0.0f).x / float(cols);
    float s2 = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float d = loadF(x, base + c) - mu;
      s2 += d * d;
    }
    float inv = 1.0f / sqrtf(blockSum2(s2, 0.0f).x / float(cols) + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      storeF(y, base + c,
             (loadF(x, base + c) - mu) * inv * loadF(scale, c) +
                 (bias.p ? loadF(bias, c) : 0.0f));
    if (threadIdx.x == 0) {
      if (mean)
        mean[r] = mu;
      if (invStd)
        invStd[r] = inv;
    }
  }
}

/// dX = inv * (g - mean(g) - xh * mean(g * xh)) with g = dY * scale and
/// xh = (x - mean) * inv; one block per row.
__global__ void layerNormGradDxKernel(int64_t rows, int64_t cols, FloatPtr dy,
                                      FloatPtr x, FloatPtr scale,
                                      const float *mean, const float *invStd,
                                      FloatPtr dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * cols;
    float mu = mean[r], inv = invStd[r], a = 0, b = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float g = loadF(dy, base + c) * loadF(scale, c);
      a += g;
      b += g * (loadF(x, base + c) - mu) * inv;
    }
    float2 ab = blockSum2(a, b);
    a = ab.x / float(cols);
    b = ab.y / float(cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float g = loadF(dy, base + c) * loadF(scale, c);
      float xh = (loadF(x, base + c) - mu) * inv;
      storeF(dx, base + c, inv * (g - a - xh * b));
    }
  }
}

/// dScale = sum over rows of dY * xh, dB = sum of dY: a block per 32
/// columns, its 32x32 threads reading rows ty, ty + 32, ... (coalesced along
/// the columns), then the 32 partial sums of each column in order.
__global__ void layerNormGradParamKernel(int64_t rows, int64_t cols,
                                         FloatPtr dy, FloatPtr x,
                                         const float *mean, const float *invStd,
                                         FloatPtr dScale, FloatPtr dBias) {
  __shared__ float ps[32][33], pb[32][33];
  int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float ds = 0, db = 0;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 32) {
      float g = loadF(dy, r * cols + c);
      ds += g * (loadF(x, r * cols + c) - mean[r]) * invStd[r];
      db += g;
    }
  ps[threadIdx.y][threadIdx.x] = ds;
  pb[threadIdx.y][threadIdx.x] = db;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols)
    return;
  ds = db = 0;
  for (int k = 0; k < 32; ++k) {
    ds += ps[k][threadIdx.x];
    db += pb[k][threadIdx.x];
  }
  if (dScale.p)
    storeF(dScale, c, ds);
  if (dBias.p)
    storeF(dBias, c, db);
}

/// Threads per block for a row of `cols` elements: a multiple of 32, at
/// most 1024, about 4 elements a thread.
unsigned rowThreads(int64_t cols) {
  int64_t t = (cols / 4 + 31) / 32 * 32;
  return unsigned(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

unsigned rowBlocks(int64_t rows) {
  return unsigned(rows < 1 ? 1 : rows > 65535 * 16 ? 65535 * 16 : rows);
}

} // namespace

void launchUnary(UnaryOp op, FloatPtr x, FloatPtr y, int64_t n, float a,
                 float b, cudaStream_t s) {
  unaryKernel<<<blocksFor(n), kThreads, 0, s>>>(op, x, y, n, a, b);
  launched("activation");
}

void launchGrad(GradOp op, FloatPtr dy, FloatPtr z, FloatPtr dx, int64_t n,
                float a, float b, cudaStream_t s) {
  gradKernel<<<blocksFor(n), kThreads, 0, s>>>(op, dy, z, dx, n, a, b);
  launched("activation gradient");
}

void launchCompare(CmpOp op, DType in, const Broadcast &b, uint8_t *y,
                   int64_t n, cudaStream_t s) {
  switch (in) {
  case DType::F32:
    compareKernel<float><<<blocksFor(n), kThreads, 0, s>>>(op, b, y, n);
    break;
  case DType::I64:
    compareKernel<int64_t><<<blocksFor(n), kThreads, 0, s>>>(op, b, y, n);
    break;
  case DType::I32:
    compareKernel<int32_t><<<blocksFor(n), kThreads, 0, s>>>(op, b, y, n);
    break;
  default:
    compareKernel<uint8_t><<<blocksFor(n), kThreads, 0, s>>>(op, b, y, n);
    break;
  }
  launched("comparison");
}

void launchNot(const uint8_t *x, uint8_t *y, int64_t n, cudaStream_t s) {
  notKernel<<<blocksFor(n), kThreads, 0, s>>>(x, y, n);
  launched("Not");
}

void launchWhere(const Broadcast &b, size_t elem, void *y, int64_t n,
                 cudaStream_t s) {
  if (elem == 1)
    whereKernel<uint8_t>
        <<<blocksFor(n), kThreads, 0, s>>>(b, static_cast<uint8_t *>(y), n);
  else if (elem == 2)
    whereKernel<uint16_t>
        <<<blocksFor(n), kThreads, 0, s>>>(b, static_cast<uint16_t *>(y), n);
  else if (elem == 4)
    whereKernel<uint32_t>
        <<<blocksFor(n), kThreads, 0, s>>>(b, static_cast<uint32_t *>(y), n);
  else
    whereKernel<uint64_t>
        <<<blocksFor(n), kThreads, 0, s>>>(b, static_cast<uint64_t *>(y), n);
  launched("Where");
}

void launchCast(DType from, DType to, const void *x, void *y, int64_t n,
                cudaStream_t s) {
  // f32 <-> bf16/f16, mixed precision's casts: the wire's kernels.
  if (from == DType::F32 && isLowFloat(to))
    return launchToWire(to == DType::BF16, static_cast<const float *>(x), y, n,
                        s);
  if (isLowFloat(from) && to == DType::F32)
    return launchFromWire(from == DType::BF16, x, static_cast<float *>(y), n,
                          1.0f, s);
  castKernel<<<blocksFor(n), kThreads, 0, s>>>(from, to, x, y, n);
  launched("Cast");
}

void launchFill(DType t, void *y, int64_t n, double value, cudaStream_t s) {
  fillKernel<<<blocksFor(n), kThreads, 0, s>>>(t, y, n, value);
  launched("ConstantOfShape");
}

void launchRange(DType t, const void *start, const void *delta, void *y,
                 int64_t n, cudaStream_t s) {
  rangeKernel<<<blocksFor(n), kThreads, 0, s>>>(t, start, delta, y, n);
  launched("Range");
}

void launchTrilu(const void *x, void *y, size_t elem, int64_t rows,
                 int64_t cols, int64_t n, const int64_t *k, bool upper,
                 cudaStream_t s) {
  triluKernel<<<blocksFor(n), kThreads, 0, s>>>(static_cast<const char *>(x),
                                                static_cast<char *>(y), elem,
                                                rows, cols, n, k, upper);
  launched("Trilu");
}

void launchScatterND(const ScatterNDGeom &g, const int64_t *indices,
                     const void *updates, void *y, size_t elem,
                     cudaStream_t s) {
  int64_t n = g.count * g.slice;
  if (n == 0)
    return;
  scatterNDKernel<<<blocksFor(n), kThreads, 0, s>>>(
      g, indices, static_cast<const char *>(updates), static_cast<char *>(y),
      elem);
  launched("ScatterND");
}

__global__ void argKernel(ArgGeom g, const float *x, int64_t *y) {
  OASR_GRID_LOOP(l, g.outer * g.inner) { y[l] = argExtremeLine(g, x, l); }
}

__global__ void topKKernel(TopKGeom g, const float *x, float *v, int64_t *ix) {
  OASR_GRID_LOOP(l, g.outer * g.inner) { topKLine(g, x, v, ix, l); }
}

__global__ void oneHotKernel(OneHotGeom g, const void *indices,
                             const char *values, char *y, size_t elem) {
  OASR_GRID_LOOP(e, g.outer * g.depth * g.inner) {
    int64_t i = e % g.inner, d = (e / g.inner) % g.depth,
            o = e / (g.inner * g.depth), l = o * g.inner + i;
    int64_t k = g.indexType == DType::F32
                    ? int64_t(static_cast<const float *>(indices)[l])
                    : indexAt(indices, g.indexType == DType::I64, l);
    k = k < 0 ? k + g.depth : k;
    const char *src = values + (k == d ? elem : 0);
    for (size_t b = 0; b < elem; ++b)
      y[e * elem + b] = src[b];
  }
}

__global__ void gatherNDKernel(ScatterNDGeom g, const char *x,
                               const int64_t *idx, char *y, size_t elem) {
  OASR_GRID_LOOP(e, g.count * g.slice) {
    int64_t t = e / g.slice, j = e % g.slice;
    int64_t off = ndTupleOffset(g, idx, t);
    for (size_t b = 0; b < elem; ++b)
      y[e * elem + b] = off < 0 ? 0 : x[(off + j) * elem + b];
  }
}

void launchArg(const ArgGeom &g, const float *x, int64_t *y, cudaStream_t s) {
  int64_t n = g.outer * g.inner;
  if (n == 0)
    return;
  argKernel<<<blocksFor(n), kThreads, 0, s>>>(g, x, y);
  launched("ArgMax/ArgMin");
}

void launchTopK(const TopKGeom &g, const float *x, float *values,
                int64_t *indices, cudaStream_t s) {
  int64_t n = g.outer * g.inner;
  if (n == 0 || g.k == 0)
    return;
  topKKernel<<<blocksFor(n), kThreads, 0, s>>>(g, x, values, indices);
  launched("TopK");
}

void launchOneHot(const OneHotGeom &g, const void *indices, const void *values,
                  void *y, size_t elem, cudaStream_t s) {
  int64_t n = g.outer * g.depth * g.inner;
  if (n == 0)
    return;
  oneHotKernel<<<blocksFor(n), kThreads, 0, s>>>(
      g, indices, static_cast<const char *>(values), static_cast<char *>(y),
      elem);
  launched("OneHot");
}

void launchGatherND(const ScatterNDGeom &g, const void *data,
                    const int64_t *indices, void *y, size_t elem,
                    cudaStream_t s) {
  int64_t n = g.count * g.slice;
  if (n == 0)
    return;
  gatherNDKernel<<<blocksFor(n), kThreads, 0, s>>>(
      g, static_cast<const char *>(data), indices, static_cast<char *>(y),
      elem);
  launched("GatherND");
}

void launchTranspose(const TransposeParams &given, const void *x, void *y,
                     size_t elem, int64_t n, cudaStream_t s) {
  TransposeParams p = given.tileRows > 0 ? given : collapsed(given);
  // Where the innermost dimension is kept, move `w` elements as one word
  // of up to 8 bytes (every stride and both addresses allowing it).
  if (p.tileRows == 0 && p.inStrides[p.rank - 1] == 1) {
    int64_t w = elem < 8 ? int64_t(8 / elem) : 1;
    auto fits = [&](int64_t w) {
      if (p.outDims[p.rank - 1] % w ||
          (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) %
              (w * int64_t(elem)))
        return false;
      for (int d = 0; d + 1 < p.rank; ++d)
        if (p.inStrides[d] % w)
          return false;
      return true;
    };
    while (w > 1 && !fits(w))
      w /= 2;
    if (w > 1) {
      p.outDims[p.rank - 1] /= w;
      for (int d = 0; d + 1 < p.rank; ++d)
        p.inStrides[d] /= w;
      elem *= size_t(w);
      n /= w;
    }
  }
  switch (elem) {
  case 1:
    launchTransposeOf<uint8_t>(p, x, y, n, s);
    break;
  case 2:
    launchTransposeOf<uint16_t>(p, x, y, n, s);
    break;
  case 4:
    launchTransposeOf<uint32_t>(p, x, y, n, s);
    break;
  default:
    launchTransposeOf<uint64_t>(p, x, y, n, s);
    break;
  }
  launched("Transpose");
}

template <typename T>
__global__ void cumSumKernel(CumSumGeom g, const T *x, T *y) {
  OASR_GRID_LOOP(l, g.outer * g.inner) { cumSumLine(g, x, y, l); }
}

void launchCumSum(const CumSumGeom &g, const void *x, void *y, bool i64,
                  cudaStream_t s) {
  int64_t lines = g.outer * g.inner;
  if (i64)
    cumSumKernel<<<blocksFor(lines), kThreads, 0, s>>>(
        g, static_cast<const int64_t *>(x), static_cast<int64_t *>(y));
  else
    cumSumKernel<<<blocksFor(lines), kThreads, 0, s>>>(
        g, static_cast<const float *>(x), static_cast<float *>(y));
  launched("CumSum");
}

__global__ void elementsKernel(ElementsGeom g, const char *data,
                               const void *indices, const char *updates,
                               char *y, size_t elem) {
  OASR_GRID_LOOP(i, g.count) {
    int64_t j = g.i64 ? static_cast<const int64_t *>(indices)[i]
                      : static_cast<const int32_t *>(indices)[i];
    if (j < 0)
      j += g.axisDim;
    if (j < 0 || j >= g.axisDim)
      continue;
    int64_t off = elementsOffset(g, i, j);
    if (!updates) {
      for (size_t b = 0; b < elem; ++b)
        y[i * elem + b] = data[off * elem + b];
    } else if (g.add) {
      atomicAdd(reinterpret_cast<float *>(y) + off,
                reinterpret_cast<const float *>(updates)[i]);
    } else {
      for (size_t b = 0; b < elem; ++b)
        y[off * elem + b] = updates[i * elem + b];
    }
  }
}

void launchElements(const ElementsGeom &g, const void *data,
                    const void *indices, const void *updates, void *y,
                    size_t elem, cudaStream_t s) {
  elementsKernel<<<blocksFor(g.count), kThreads, 0, s>>>(
      g, static_cast<const char *>(data), indices,
      static_cast<const char *>(updates), static_cast<char *>(y), elem);
  launched(updates ? "ScatterElements" : "GatherElements");
}

void launchGather(const GatherParams &p, const void *data, const void *indices,
                  bool i64, void *y, size_t elem, int64_t n, cudaStream_t s) {
  gatherKernel<<<blocksFor(n), kThreads, 0, s>>>(
      p, static_cast<const char *>(data), indices, i64, static_cast<char *>(y),
      elem, n);
  launched("Gather");
}

void launchGatherGrad(const GatherParams &p, const float *dy,
                      const void *indices, bool i64, float *dx, int64_t dxNumel,
                      int64_t n, cudaStream_t s) {
  check(cudaMemsetAsync(dx, 0, size_t(dxNumel) * sizeof(float), s),
        "GatherGrad zero");
  gatherGradKernel<<<blocksFor(n), kThreads, 0, s>>>(p, dy, indices, i64, dx,
                                                     n);
  launched("GatherGrad");
}

void launchGatherGradUnique(const GatherParams &p, FloatPtr dy,
                            const void *indices, bool i64, FloatPtr dx,
                            int64_t dxBytes, int64_t n, cudaStream_t s) {
  check(cudaMemsetAsync(dx.p, 0, size_t(dxBytes), s), "GatherGrad zero");
  gatherGradUniqueKernel<<<blocksFor(n), kThreads, 0, s>>>(p, dy, indices, i64,
                                                           dx, n);
  launched("GatherGrad");
}

void launchSoftmax(const RowParams &p, FloatPtr x, FloatPtr y, bool logForm,
                   cudaStream_t s) {
  int64_t rows = p.outer * p.inner;
  if (p.inner == 1)
    softmaxRowKernel<<<blocksFor(rows * 32), kThreads, 0, s>>>(rows, p.axis, x,
                                                               y, logForm);
  else
    softmaxKernel<<<blocksFor(rows), kThreads, 0, s>>>(p, x, y, logForm, rows);
  launched("Softmax");
}

void launchAttentionMask(float *scores, int64_t count, int64_t first, int64_t m,
                         int64_t n, const uint8_t *mask,
                         const int64_t *maskOffset, int64_t rowStride,
                         int64_t colStride, cudaStream_t s) {
  int64_t total = count * m * n;
  attentionMaskKernel<<<blocksFor(total), kThreads, 0, s>>>(
      scores, total, first, m, n, mask, maskOffset, rowStride, colStride);
  launched("FusedAttention mask");
}

void launchSoftmaxGrad(const RowParams &p, FloatPtr dy, FloatPtr y, FloatPtr dx,
                       bool logForm, cudaStream_t s) {
  int64_t rows = p.outer * p.inner;
  if (p.inner == 1)
    softmaxGradRowKernel<<<blocksFor(rows * 32), kThreads, 0, s>>>(
        rows, p.axis, dy, y, dx, logForm);
  else
    softmaxGradKernel<<<blocksFor(rows), kThreads, 0, s>>>(p, dy, y, dx,
                                                           logForm, rows);
  launched("SoftmaxGrad");
}

void launchLayerNorm(int64_t rows, int64_t cols, float eps, FloatPtr x,
                     FloatPtr scale, FloatPtr bias, FloatPtr y, float *mean,
                     float *invStd, cudaStream_t s) {
  layerNormKernel<<<rowBlocks(rows), rowThreads(cols), 0, s>>>(
      rows, cols, eps, x, scale, bias, y, mean, invStd);
  launched("LayerNormalization");
}

void launchLayerNormGrad(int64_t rows, int64_t cols, FloatPtr dy, FloatPtr x,
                         FloatPtr scale, const float *mean, const float *invStd,
                         FloatPtr dx, FloatPtr dScale, FloatPtr dBias,
                         cudaStream_t s) {
  if (dx.p)
    layerNormGradDxKernel<<<rowBlocks(rows), rowThreads(cols), 0, s>>>(
        rows, cols, dy, x, scale, mean, invStd, dx);
  if (dScale.p || dBias.p)
    layerNormGradParamKernel<<<unsigned((cols + 31) / 32), dim3(32, 32), 0,
                               s>>>(rows, cols, dy, x, mean, invStd, dScale,
                                    dBias);
  launched("LayerNormalizationGrad");
}

} // namespace oasr::rt::cuda
