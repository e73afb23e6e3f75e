//===- NormKernels.cpp - Batch and layer normalization --------------------===//
//
// BatchNormalization and LayerNormalization with their gradients, the ops of
// the CUDA backend's NormKernels.cpp. Batch normalization runs on oneDNN for
// f32 data and in its own loops for bf16 data; layer normalization runs in
// its own loops for f32 and bf16 data. Scale, bias and statistics stay f32
// (docs/precision.md, "normalize"); long sums run in blocks, in vector lanes
// (VectorSums.h).
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"
#include "VectorSums.h"
#include "oasr/Runtime/LowFloat.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace oasr::rt::cpu {

//===----------------------------------------------------------------------===//
// BatchNormalization on bf16 data
//===----------------------------------------------------------------------===//
//
// oneDNN 2.6 runs bf16 batch normalization on plain NCHW with a reference
// implementation (slower than widening to its f32 JIT kernel), so bf16 data
// gets these loops: statistics, scale and bias in f32, every plane summed
// in f32 lanes and the planes added in double (no long running f32 sum),
// one pass for the statistics and one for the result, reading bf16.

/// The sums over one plane of `n` bf16 elements: of x - shift and of its
/// square (shifted by an estimate of the mean, for accuracy).
static void planeSums(const uint16_t *x, int64_t n, float shift, double &s1,
                      double &s2) {
  float a1 = 0, a2 = 0;
#pragma omp simd reduction(+ : a1, a2)
  for (int64_t i = 0; i < n; ++i) {
    float d = bf16ToFloat(x[i]) - shift;
    a1 += d;
    a2 += d * d;
  }
  s1 += a1;
  s2 += a2;
}

namespace {

class BatchNormBF16Kernel final : public CpuKernel {
public:
  BatchNormBF16Kernel(const OpSpec &spec, bool training)
      : CpuKernel(spec), training(training) {
    const auto &xs = spec.inputs[0].shape;
    n = xs[0];
    c = xs[1];
    plane = 1;
    for (size_t i = 2; i < xs.size(); ++i)
      plane *= xs[i];
    eps = float(spec.attrs.getFloat("epsilon", 1e-5));
    momentum = float(spec.attrs.getFloat("momentum", 0.9));
    numOutputs = spec.outputs.size();
  }

protected:
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const uint16_t *x = in[0].as<uint16_t>();
    uint16_t *y = out[0].as<uint16_t>();
    const float *scale = in[1].as<float>(), *bias = in[2].as<float>();
    const float *rm = in[3].as<float>(), *rv = in[4].as<float>();
    float *rmOut = training && numOutputs >= 2 ? out[1].as<float>() : nullptr;
    float *rvOut = training && numOutputs >= 3 ? out[2].as<float>() : nullptr;
    float *savedMean =
        training && numOutputs >= 4 ? out[3].as<float>() : nullptr;
    float *invStdOut =
        training && numOutputs >= 5 ? out[4].as<float>() : nullptr;
    const int64_t count = n * plane;
    const float unbias = count > 1 ? float(count) / float(count - 1) : 1.0f;
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      float mean = rm[ch], var = rv[ch];
      if (training) {
        float shift = bf16ToFloat(x[ch * plane]);
        double s1 = 0, s2 = 0;
        for (int64_t b = 0; b < n; ++b)
          planeSums(x + (b * c + ch) * plane, plane, shift, s1, s2);
        double m = s1 / double(count);
        mean = float(shift + m);
        var = float(std::max(0.0, s2 / double(count) - m * m));
        if (rmOut)
          rmOut[ch] = momentum * rm[ch] + (1 - momentum) * mean;
        if (rvOut)
          rvOut[ch] = momentum * rv[ch] + (1 - momentum) * var * unbias;
        if (savedMean)
          savedMean[ch] = mean;
      }
      float invStd = 1.0f / std::sqrt(var + eps);
      if (invStdOut)
        invStdOut[ch] = invStd;
      float a = scale[ch] * invStd, b0 = bias[ch] - mean * a;
      for (int64_t b = 0; b < n; ++b) {
        const uint16_t *xp = x + (b * c + ch) * plane;
        uint16_t *yp = y + (b * c + ch) * plane;
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i)
          yp[i] = floatToBF16(bf16ToFloat(xp[i]) * a + b0);
      }
    }
  }

private:
  bool training;
  int64_t n, c, plane;
  float eps, momentum;
  size_t numOutputs;
};

/// dY, X (bf16), scale, saved_mean, saved_inv_std -> dX (bf16), dScale,
/// dBias.
class BatchNormGradBF16Kernel final : public CpuKernel {
public:
  explicit BatchNormGradBF16Kernel(const OpSpec &spec) : CpuKernel(spec) {
    const auto &xs = spec.inputs[1].shape;
    n = xs[0];
    c = xs[1];
    plane = 1;
    for (size_t i = 2; i < xs.size(); ++i)
      plane *= xs[i];
    numOutputs = spec.outputs.size();
  }

protected:
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const uint16_t *dy = in[0].as<uint16_t>(), *x = in[1].as<uint16_t>();
    const float *scale = in[2].as<float>(), *mean = in[3].as<float>(),
                *invStd = in[4].as<float>();
    uint16_t *dx = out[0].as<uint16_t>();
    float *dScale = numOutputs >= 2 ? out[1].as<float>() : nullptr;
    float *dBias = numOutputs >= 3 ? out[2].as<float>() : nullptr;
    const double count = double(n * plane);
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float m = mean[ch], is = invStd[ch];
      double sdy = 0, sdyx = 0;
      for (int64_t b = 0; b < n; ++b) {
        const uint16_t *dp = dy + (b * c + ch) * plane,
                       *xp = x + (b * c + ch) * plane;
        float a1 = 0, a2 = 0;
#pragma omp simd reduction(+ : a1, a2)
        for (int64_t i = 0; i < plane; ++i) {
          float g = bf16ToFloat(dp[i]);
          a1 += g;
          a2 += g * (bf16ToFloat(xp[i]) - m);
        }
        sdy += a1;
        sdyx += a2;
      }
      // dScale = sum(dy * xhat), dBias = sum(dy).
      float ds = float(sdyx * is), db = float(sdy);
      if (dScale)
        dScale[ch] = ds;
      if (dBias)
        dBias[ch] = db;
      // dx = scale * invStd * (dy - dBias/M - xhat * dScale/M).
      const float k = scale[ch] * is, meanDy = float(sdy / count),
                  kx = float(ds / count) * is;
      for (int64_t b = 0; b < n; ++b) {
        const uint16_t *dp = dy + (b * c + ch) * plane,
                       *xp = x + (b * c + ch) * plane;
        uint16_t *op = dx + (b * c + ch) * plane;
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i)
          op[i] = floatToBF16(k * (bf16ToFloat(dp[i]) - meanDy -
                                   (bf16ToFloat(xp[i]) - m) * kx));
      }
    }
  }

private:
  int64_t n, c, plane;
  size_t numOutputs;
};

} // namespace

static std::unique_ptr<Kernel> createBatchNormBF16(const OpSpec &spec,
                                                   bool training) {
  return std::make_unique<BatchNormBF16Kernel>(spec, training);
}

static std::unique_ptr<Kernel> createBatchNormGradBF16(const OpSpec &spec) {
  return std::make_unique<BatchNormGradBF16Kernel>(spec);
}

//===----------------------------------------------------------------------===//
// BatchNormalization / BatchNormalizationGrad
//===----------------------------------------------------------------------===//

static const dnnl::normalization_flags kScaleShift =
    dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

static Status checkBnShapes(const OpSpec &spec, const TensorDesc &x,
                            const std::vector<size_t> &perChannelInputs,
                            const std::vector<size_t> &perChannelOutputs) {
  if (x.rank() < 2 || x.rank() > 5) {
    return nodeError(spec,
                     "expects X of rank 2 to 5, got " + shapeStr(x.shape));
  }
  int64_t c = x.shape[1];
  auto bad = [&](bool isInput, size_t i, const TensorDesc &d) {
    return nodeError(spec, std::string(isInput ? "operand " : "result ") +
                               std::to_string(i) + " has shape " +
                               shapeStr(d.shape) + ", expected [" +
                               std::to_string(c) + "]");
  };
  for (size_t i : perChannelInputs)
    if (i < spec.inputs.size() && spec.inputs[i].numel() != c)
      return bad(true, i, spec.inputs[i]);
  for (size_t i : perChannelOutputs)
    if (i < spec.outputs.size() && spec.outputs[i].numel() != c)
      return bad(false, i, spec.outputs[i]);
  return Status::success();
}

/// The oneDNN type of a normalisation whose data tensors (`ins`, `outs`)
/// are one type, f32 or bf16, and whose other float tensors (scale, bias,
/// statistics) are f32; oneDNN computes the statistics in f32 either way.
static Status normTypes(const OpSpec &spec, const std::vector<size_t> &ins,
                        const std::vector<size_t> &outs,
                        const std::vector<size_t> &f32Ins,
                        const std::vector<size_t> &f32Outs, dt &type) {
  OASR_RETURN_IF_ERROR(uniformFloat(spec, ins, outs, type));
  return checkAllF32(spec, f32Ins, f32Outs);
}

namespace {

/// BatchNormalization: X, scale, B, mean, var -> Y[, running_mean',
/// running_var'[, saved_mean, saved_inv_std]] (training) or -> Y (inference).
class BatchNormKernel final : public CpuKernel {
public:
  BatchNormKernel(const OpSpec &spec, bool training)
      : CpuKernel(spec), training(training) {
    const TensorDesc &xd = spec.inputs[0];
    c = xd.shape[1];
    count = xd.numel() / c;
    eps = float(spec.attrs.getFloat("epsilon", 1e-5));
    momentum = float(spec.attrs.getFloat("momentum", 0.9));
    numOutputs = spec.outputs.size();
    memory::desc md = plainDesc(xd.shape, dataType(xd)), cmd = plainDesc({c});
    auto flags =
        training ? kScaleShift
                 : kScaleShift | dnnl::normalization_flags::use_global_stats;
    dnnl::batch_normalization_forward::desc d(
        training ? dnnl::prop_kind::forward_training
                 : dnnl::prop_kind::forward_inference,
        md, eps, flags);
    dnnl::batch_normalization_forward::primitive_desc pd(d, engine());
    prim = dnnl::batch_normalization_forward(pd);
    x = userMem(md);
    y = userMem(md);
    scale = userMem(cmd);
    shift = userMem(cmd);
    mean = userMem(cmd);
    var = userMem(cmd);
    if (training) {
      meanBuf.resize(c);
      varBuf.resize(c);
    }
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    auto &s = stream();
    bindMem(x, in[0].data);
    bindMem(scale, in[1].data);
    bindMem(shift, in[2].data);
    bindMem(y, out[0].data);
    if (!training) {
      bindMem(mean, in[3].data);
      bindMem(var, in[4].data);
    } else {
      // Batch statistics land in saved_mean (when present) and a scratch
      // variance; the inputs' running stats are read after the primitive.
      bindMem(mean, numOutputs >= 4 ? out[3].data : meanBuf.data());
      bindMem(var, varBuf.data());
    }
    prim.execute(s, {{DNNL_ARG_SRC, x},
                     {DNNL_ARG_DST, y},
                     {DNNL_ARG_SCALE, scale},
                     {DNNL_ARG_SHIFT, shift},
                     {DNNL_ARG_MEAN, mean},
                     {DNNL_ARG_VARIANCE, var}});
    s.wait();
    if (!training)
      return;
    const float *bm = static_cast<const float *>(mean.get_data_handle());
    const float *bv = varBuf.data();
    const float *rm = in[3].as<float>(), *rv = in[4].as<float>();
    float *rmOut = numOutputs >= 2 ? out[1].as<float>() : nullptr;
    float *rvOut = numOutputs >= 3 ? out[2].as<float>() : nullptr;
    float *invStd = numOutputs >= 5 ? out[4].as<float>() : nullptr;
    // PyTorch updates the running variance with the unbiased estimate.
    float unbias = count > 1 ? float(count) / float(count - 1) : 1.0f;
    for (int64_t i = 0; i < c; ++i) {
      float m = bm[i], v = bv[i];
      if (rmOut)
        rmOut[i] = momentum * rm[i] + (1 - momentum) * m;
      if (rvOut)
        rvOut[i] = momentum * rv[i] + (1 - momentum) * v * unbias;
      if (invStd)
        invStd[i] = 1.0f / std::sqrt(v + eps);
    }
  }

private:
  bool training;
  int64_t c, count;
  float eps, momentum;
  size_t numOutputs;
  dnnl::batch_normalization_forward prim;
  memory x, y, scale, shift, mean, var;
  std::vector<float> meanBuf, varBuf;
};

} // namespace

static KernelOr createBatchNorm(const OpSpec &spec) {
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 5, 5, 1, 5));
  OASR_RETURN_IF_ERROR(
      normTypes(spec, {0}, {0}, {1, 2, 3, 4}, {1, 2, 3, 4}, type));
  bool training = spec.attrs.has("training_mode")
                      ? spec.attrs.getInt("training_mode") != 0
                      : spec.outputs.size() > 1;
  if (!training && spec.outputs.size() > 1) {
    return nodeError(spec, "inference form (training_mode = 0) has one "
                           "result, got " +
                               std::to_string(spec.outputs.size()));
  }
  OASR_RETURN_IF_ERROR(
      checkBnShapes(spec, spec.inputs[0], {1, 2, 3, 4}, {1, 2, 3, 4}));
  if (spec.outputs[0].shape != spec.inputs[0].shape) {
    return nodeError(spec, "Y must have X's shape");
  }
  if (type == dt::bf16)
    return createBatchNormBF16(spec, training);
  return guardCreate(
      spec, [&] { return std::make_unique<BatchNormKernel>(spec, training); });
}

namespace {

/// BatchNormalizationGrad: dY, X, scale, saved_mean, saved_inv_std -> dX,
/// dScale, dBias.
class BatchNormGradKernel final : public CpuKernel {
public:
  explicit BatchNormGradKernel(const OpSpec &spec) : CpuKernel(spec) {
    const TensorDesc &xd = spec.inputs[1];
    c = xd.shape[1];
    eps = float(spec.attrs.getFloat("epsilon", 1e-5));
    numOutputs = spec.outputs.size();
    memory::desc md = plainDesc(xd.shape, dataType(xd)), cmd = plainDesc({c});
    dnnl::batch_normalization_forward::desc fd(
        dnnl::prop_kind::forward_training, md, eps, kScaleShift);
    dnnl::batch_normalization_forward::primitive_desc fpd(fd, engine());
    dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, md,
                                               md, eps, kScaleShift);
    dnnl::batch_normalization_backward::primitive_desc pd(d, engine(), fpd);
    prim = dnnl::batch_normalization_backward(pd);
    dy = userMem(md);
    x = userMem(md);
    dx = userMem(md);
    scale = userMem(cmd);
    mean = userMem(cmd);
    var = memory(cmd, engine());
    dScale = userMem(cmd);
    dShift = userMem(cmd);
    scratchScale.resize(c);
    scratchShift.resize(c);
    // oneDNN 2.6 lists SHIFT among the backward pass's inputs (unread).
    shift = memory(cmd, engine());
    std::memset(shift.get_data_handle(), 0, size_t(c) * sizeof(float));
  }

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    auto &s = stream();
    const float *invStd = in[4].as<float>();
    float *v = static_cast<float *>(var.get_data_handle());
    for (int64_t i = 0; i < c; ++i)
      v[i] = 1.0f / (invStd[i] * invStd[i]) - eps;
    bindMem(dy, in[0].data);
    bindMem(x, in[1].data);
    bindMem(scale, in[2].data);
    bindMem(mean, in[3].data);
    bindMem(dx, out[0].data);
    bindMem(dScale, numOutputs >= 2 ? out[1].data : scratchScale.data());
    bindMem(dShift, numOutputs >= 3 ? out[2].data : scratchShift.data());
    prim.execute(s, {{DNNL_ARG_DIFF_DST, dy},
                     {DNNL_ARG_SRC, x},
                     {DNNL_ARG_SCALE, scale},
                     {DNNL_ARG_SHIFT, shift},
                     {DNNL_ARG_MEAN, mean},
                     {DNNL_ARG_VARIANCE, var},
                     {DNNL_ARG_DIFF_SRC, dx},
                     {DNNL_ARG_DIFF_SCALE, dScale},
                     {DNNL_ARG_DIFF_SHIFT, dShift}});
    s.wait();
  }

private:
  int64_t c;
  float eps;
  size_t numOutputs;
  dnnl::batch_normalization_backward prim;
  memory dy, x, dx, scale, shift, mean, var, dScale, dShift;
  std::vector<float> scratchScale, scratchShift;
};

} // namespace

static KernelOr createBatchNormGrad(const OpSpec &spec) {
  dt type;
  OASR_RETURN_IF_ERROR(checkArity(spec, 5, 5, 1, 3));
  OASR_RETURN_IF_ERROR(normTypes(spec, {0, 1}, {0}, {2, 3, 4}, {1, 2}, type));
  OASR_RETURN_IF_ERROR(checkBnShapes(spec, spec.inputs[1], {2, 3, 4}, {1, 2}));
  if (spec.inputs[0].shape != spec.inputs[1].shape ||
      spec.outputs[0].shape != spec.inputs[1].shape) {
    return nodeError(spec, "dY, X and dX must have the same shape");
  }
  if (type == dt::bf16)
    return createBatchNormGradBF16(spec);
  return guardCreate(
      spec, [&] { return std::make_unique<BatchNormGradKernel>(spec); });
}

//===----------------------------------------------------------------------===//
// LayerNormalization / LayerNormalizationGrad
//===----------------------------------------------------------------------===//

namespace {

/// X viewed as [rows, cols]: normalized over the dims from `axis` on.
struct LnGeom {
  int64_t rows = 1, cols = 1;
  float eps = 1e-5f;
};

/// The operands of one LayerNormalization(Grad), typed by the kernel.
struct LnArgs {
  LnGeom g;
  const void *x = nullptr, *dy = nullptr;
  void *y = nullptr; ///< Y, or dX for the gradient
  const float *scale = nullptr, *bias = nullptr;
  float *mean = nullptr, *inv = nullptr;
};

} // namespace

template <typename T>
[[gnu::always_inline]] static inline void forwardRows(const LnArgs &a,
                                                      int64_t r0, int64_t r1) {
  const int64_t n = a.g.cols;
  const float *sc = a.scale, *b = a.bias;
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = static_cast<const T *>(a.x) + r * n;
    T *yr = static_cast<T *>(a.y) + r * n;
    const float mean =
        float(blockSum(n, [&](int64_t c) { return loadF(xr, c); }) / double(n));
    const double ss = blockSum(n, [&](int64_t c) {
      float d = loadF(xr, c) - mean;
      return d * d;
    });
    const float inv = float(1.0 / std::sqrt(ss / double(n) + a.g.eps));
    if (b) {
#pragma omp simd
      for (int64_t c = 0; c < n; ++c)
        storeF(yr, c, (loadF(xr, c) - mean) * inv * sc[c] + b[c]);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < n; ++c)
        storeF(yr, c, (loadF(xr, c) - mean) * inv * sc[c]);
    }
    if (a.mean)
      a.mean[r] = mean;
    if (a.inv)
      a.inv[r] = inv;
  }
}

/// dX of rows [r0, r1): dX = inv (dY sc - mean(dY sc) - x̂ mean(dY sc x̂)).
template <typename T>
[[gnu::always_inline]] static inline void gradRows(const LnArgs &a, int64_t r0,
                                                   int64_t r1) {
  const int64_t n = a.g.cols;
  const float *sc = a.scale;
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = static_cast<const T *>(a.x) + r * n;
    const T *gr = static_cast<const T *>(a.dy) + r * n;
    T *dr = static_cast<T *>(a.y) + r * n;
    const float m = a.mean[r], iv = a.inv[r];
    const float mg =
        float(blockSum(n, [&](int64_t c) { return loadF(gr, c) * sc[c]; }) /
              double(n));
    const float mgx = float(blockSum(n,
                                     [&](int64_t c) {
                                       return loadF(gr, c) * sc[c] *
                                              ((loadF(xr, c) - m) * iv);
                                     }) /
                            double(n));
#pragma omp simd
    for (int64_t c = 0; c < n; ++c)
      storeF(dr, c,
             iv * (loadF(gr, c) * sc[c] - mg - (loadF(xr, c) - m) * iv * mgx));
  }
}

/// dScale and dB over columns [c0, c1), c1 - c0 <= kSumBlock.
template <typename T>
[[gnu::always_inline]] static inline void
paramGradColumns(const LnArgs &a, float *dScale, float *dB, int64_t c0,
                 int64_t c1) {
  const int64_t n = a.g.cols, w = c1 - c0;
  const T *x = static_cast<const T *>(a.x) + c0;
  const T *dy = static_cast<const T *>(a.dy) + c0;
  double totS[kSumBlock] = {0}, totB[kSumBlock] = {0};
  columnSums(a.g.rows, w, totS, [&](int64_t r) {
    const T *xr = x + r * n, *gr = dy + r * n;
    const float m = a.mean[r], iv = a.inv[r];
    return [=](int64_t c) { return loadF(gr, c) * ((loadF(xr, c) - m) * iv); };
  });
  columnSums(a.g.rows, w, totB, [&](int64_t r) {
    const T *gr = dy + r * n;
    return [=](int64_t c) { return loadF(gr, c); };
  });
  for (int64_t c = 0; c < w; ++c) {
    if (dScale)
      dScale[c0 + c] = float(totS[c]);
    if (dB)
      dB[c0 + c] = float(totB[c]);
  }
}

// The entry points the vector variants are made of, one per element type.
OASR_VECTOR_KERNEL(void, forwardF32, (const LnArgs &a, int64_t r0, int64_t r1),
                   { forwardRows<float>(a, r0, r1); })
OASR_VECTOR_KERNEL(void, forwardBF16, (const LnArgs &a, int64_t r0, int64_t r1),
                   { forwardRows<uint16_t>(a, r0, r1); })
OASR_VECTOR_KERNEL(void, gradF32, (const LnArgs &a, int64_t r0, int64_t r1),
                   { gradRows<float>(a, r0, r1); })
OASR_VECTOR_KERNEL(void, gradBF16, (const LnArgs &a, int64_t r0, int64_t r1),
                   { gradRows<uint16_t>(a, r0, r1); })
OASR_VECTOR_KERNEL(void, paramGradF32,
                   (const LnArgs &a, float *ds, float *db, int64_t c0,
                    int64_t c1),
                   { paramGradColumns<float>(a, ds, db, c0, c1); })
OASR_VECTOR_KERNEL(void, paramGradBF16,
                   (const LnArgs &a, float *ds, float *db, int64_t c0,
                    int64_t c1),
                   { paramGradColumns<uint16_t>(a, ds, db, c0, c1); })

using RowFn = void (*)(const LnArgs &, int64_t, int64_t);

/// Runs `fn` over every row, in chunks the threads share.
static void overRows(RowFn fn, const LnArgs &a) {
  constexpr int64_t kChunk = 8;
  const int64_t chunks = (a.g.rows + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k)
    fn(a, k * kChunk, std::min(a.g.rows, (k + 1) * kChunk));
}

static Status lnGeom(const OpSpec &spec, const TensorDesc &x,
                     const TensorDesc &scale, LnGeom &g) {
  int64_t axis;
  OASR_RETURN_IF_ERROR(normAxis(spec, int64_t(x.rank()), -1, axis));
  for (int64_t k = 0; k < axis; ++k)
    g.rows *= x.shape[k];
  for (size_t k = axis; k < x.rank(); ++k)
    g.cols *= x.shape[k];
  g.eps = float(spec.attrs.getFloat("epsilon", 1e-5));
  if (scale.numel() != g.cols) {
    return nodeError(spec, "Scale has " + std::to_string(scale.numel()) +
                               " elements, expected " + std::to_string(g.cols));
  }
  return Status::success();
}

/// The data operands (`data`: X, Y, dY, dX) are all f32 or all bf16, and
/// every other operand and result is f32. A mix of other types is refused
/// (with bf16/f16 it then runs widened).
static Status checkNormTypes(const OpSpec &spec,
                             const std::vector<size_t> &dataIn,
                             const std::vector<size_t> &dataOut, bool &bf16) {
  bf16 = spec.inputs[dataIn[0]].dtype == DType::BF16;
  const DType data = bf16 ? DType::BF16 : DType::F32;
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    OASR_RETURN_IF_ERROR(
        checkDType(spec, true, i,
                   std::find(dataIn.begin(), dataIn.end(), i) != dataIn.end()
                       ? data
                       : DType::F32));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    OASR_RETURN_IF_ERROR(
        checkDType(spec, false, i,
                   std::find(dataOut.begin(), dataOut.end(), i) != dataOut.end()
                       ? data
                       : DType::F32));
  return Status::success();
}

namespace {

/// LayerNormalization: X, Scale[, B] -> Y[, Mean[, InvStdDev]].
class LayerNormKernel final : public CpuKernel {
public:
  LayerNormKernel(const OpSpec &spec, const LnGeom &g, bool bf16)
      : CpuKernel(spec), g(g), bf16(bf16) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    LnArgs a;
    a.g = g;
    a.x = in[0].data;
    a.scale = in[1].as<float>();
    a.bias = in.size() > 2 && in[2].data ? in[2].as<float>() : nullptr;
    a.y = out[0].data;
    a.mean = out.size() > 1 ? out[1].as<float>() : nullptr;
    a.inv = out.size() > 2 ? out[2].as<float>() : nullptr;
    overRows(bf16 ? forwardBF16 : forwardF32, a);
  }

private:
  LnGeom g;
  bool bf16;
};

/// LayerNormalizationGrad: dY, X, Scale, Mean, InvStdDev -> dX, dScale[, dB].
class LayerNormGradKernel final : public CpuKernel {
public:
  LayerNormGradKernel(const OpSpec &spec, const LnGeom &g, bool bf16)
      : CpuKernel(spec), g(g), bf16(bf16) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    LnArgs a;
    a.g = g;
    a.dy = in[0].data;
    a.x = in[1].data;
    a.scale = in[2].as<float>();
    a.mean = in[3].as<float>();
    a.inv = in[4].as<float>();
    a.y = out[0].data;
    overRows(bf16 ? gradBF16 : gradF32, a);
    float *ds = out.size() > 1 ? out[1].as<float>() : nullptr;
    float *db = out.size() > 2 ? out[2].as<float>() : nullptr;
    if (!ds && !db)
      return;
    // Blocks of half kSumBlock, so that 2 threads share a 768-wide row.
    constexpr int64_t kCols = kSumBlock / 2;
    const int64_t blocks = (g.cols + kCols - 1) / kCols;
    const auto fn = bf16 ? paramGradBF16 : paramGradF32;
#pragma omp parallel for schedule(static)
    for (int64_t bk = 0; bk < blocks; ++bk)
      fn(a, ds, db, bk * kCols, std::min(g.cols, (bk + 1) * kCols));
  }

private:
  LnGeom g;
  bool bf16;
};

} // namespace

static KernelOr createLayerNorm(const OpSpec &spec) {
  bool bf16;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 3, 1, 3));
  OASR_RETURN_IF_ERROR(checkNormTypes(spec, {0}, {0}, bf16));
  LnGeom g;
  OASR_RETURN_IF_ERROR(lnGeom(spec, spec.inputs[0], spec.inputs[1], g));
  if ((spec.inputs.size() > 2 && spec.inputs[2].numel() != g.cols) ||
      spec.outputs[0].shape != spec.inputs[0].shape ||
      (spec.outputs.size() > 1 && spec.outputs[1].numel() != g.rows) ||
      (spec.outputs.size() > 2 && spec.outputs[2].numel() != g.rows)) {
    return nodeError(spec, "B, Y, Mean or InvStdDev has the wrong size");
  }
  return std::make_unique<LayerNormKernel>(spec, g, bf16);
}

static KernelOr createLayerNormGrad(const OpSpec &spec) {
  bool bf16;
  OASR_RETURN_IF_ERROR(checkArity(spec, 5, 5, 1, 3));
  OASR_RETURN_IF_ERROR(checkNormTypes(spec, {0, 1}, {0}, bf16));
  LnGeom g;
  OASR_RETURN_IF_ERROR(lnGeom(spec, spec.inputs[1], spec.inputs[2], g));
  if (spec.inputs[0].shape != spec.inputs[1].shape ||
      spec.outputs[0].shape != spec.inputs[1].shape ||
      spec.inputs[3].numel() != g.rows || spec.inputs[4].numel() != g.rows) {
    return nodeError(spec, "dY, X, dX, Mean or InvStdDev has the wrong size");
  }
  return std::make_unique<LayerNormGradKernel>(spec, g, bf16);
}

void registerNormKernels(KernelRegistry &r) {
  r["BatchNormalization"] = createBatchNorm;
  r["BatchNormalizationGrad"] = createBatchNormGrad;
  r["LayerNormalization"] = createLayerNorm;
  r["LayerNormalizationGrad"] = createLayerNormGrad;
}

} // namespace oasr::rt::cpu
