//===- PoolingLossKernels.cpp - Dropout, pooling and losses ---------------===//
//
// Dropout/DropoutGrad (a counter-based mask), MaxPool with indices and
// MaxPoolGrad, GlobalAveragePool(Grad), and SoftmaxCrossEntropyLoss(Grad).
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

namespace oasr::rt::cpu {

namespace {

//===----------------------------------------------------------------------===//
// Dropout / DropoutGrad
//===----------------------------------------------------------------------===//

/// Dropout: X[, ratio[, training_mode]] -> Y[, mask]. The mask of element i
/// at step s is a pure function of (seed, s, i) (dropoutKeeps, shared with
/// the cuda backend), so results do not depend on the thread count and runs
/// are reproducible; every run is a new step.
class DropoutKernel final : public CpuKernel {
public:
  explicit DropoutKernel(const OpSpec &spec)
      : CpuKernel(spec), seed(spec.seed), n(spec.inputs[0].numel()),
        defaultRatio(spec.attrs.getFloat("ratio", 0.5)),
        defaultTraining(spec.attrs.getInt("training_mode", 0) != 0) {}

  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double ratio = defaultRatio, training = defaultTraining;
    scalarOperand(in, 1, ratio);
    scalarOperand(in, 2, training);
    if (ratio < 0 || ratio > 1)
      fatal(nodeName, op,
            "ratio " + std::to_string(ratio) + " is outside [0, 1]");
    const float *x = in[0].as<float>();
    float *y = out[0].as<float>();
    uint8_t *mask = out.size() > 1 ? out[1].as<uint8_t>() : nullptr;
    const int64_t count = n;
    if (training == 0 || ratio == 0) {
      parallelCopy(y, x, size_t(count) * sizeof(float));
      if (mask)
        std::memset(mask, 1, size_t(count));
      return;
    }
    const uint64_t stepKey = dropoutStepKey(seed, step++);
    const uint64_t threshold = dropoutThreshold(ratio);
    const float scale = ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i) {
      bool keep = dropoutKeeps(stepKey, uint64_t(i), threshold);
      y[i] = keep ? x[i] * scale : 0.0f;
      if (mask)
        mask[i] = keep;
    }
  }

  bool randomPosition(uint64_t &position) const override {
    position = step;
    return true;
  }
  void setRandomPosition(uint64_t position) override { step = position; }

private:
  uint64_t seed, step = 0;
  int64_t n;
  double defaultRatio;
  bool defaultTraining;
};

std::unique_ptr<Kernel> createDropout(const OpSpec &spec, std::string &error) {
  if (!checkDropout(spec, error))
    return nullptr;
  return std::make_unique<DropoutKernel>(spec);
}

/// DropoutGrad: dY, mask[, ratio[, training_mode]] -> dX = dY * mask /
/// (1 - ratio).
class DropoutGradKernel final : public CpuKernel {
public:
  explicit DropoutGradKernel(const OpSpec &spec)
      : CpuKernel(spec), n(spec.inputs[0].numel()),
        defaultRatio(spec.attrs.getFloat("ratio", 0.5)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double ratio = defaultRatio, training = 1;
    scalarOperand(in, 2, ratio);
    scalarOperand(in, 3, training);
    const float *dy = in[0].as<float>();
    const uint8_t *mask = in[1].as<uint8_t>();
    float *dx = out[0].as<float>();
    const int64_t count = n;
    if (training == 0) {
      parallelCopy(dx, dy, size_t(count) * sizeof(float));
      return;
    }
    const float scale = ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i)
      dx[i] = mask[i] ? dy[i] * scale : 0.0f;
  }

private:
  int64_t n;
  double defaultRatio;
};

std::unique_ptr<Kernel> createDropoutGrad(const OpSpec &spec,
                                          std::string &error) {
  if (!checkDropoutGrad(spec, error))
    return nullptr;
  return std::make_unique<DropoutGradKernel>(spec);
}

//===----------------------------------------------------------------------===//
// MaxPool / MaxPoolGrad
//===----------------------------------------------------------------------===//

/// MaxPool: X -> Y[, Indices]; Indices are flat offsets into each (n, c)
/// plane of X (PyTorch's convention).
class MaxPoolKernel final : public CpuKernel {
public:
  MaxPoolKernel(const OpSpec &spec, const Pool2D &g) : CpuKernel(spec), g(g) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>();
    float *y = out[0].as<float>();
    int64_t *ind = out.size() > 1 ? out[1].as<int64_t>() : nullptr;
    const Pool2D p = g;
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < p.planes; ++pl) {
      const float *xp = x + pl * p.ih * p.iw;
      float *yp = y + pl * p.oh * p.ow;
      int64_t *ip = ind ? ind + pl * p.oh * p.ow : nullptr;
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          float best;
          int64_t bestIdx;
          maxPoolAt(p, xp, oy, ox, best, bestIdx);
          yp[oy * p.ow + ox] = best;
          if (ip)
            ip[oy * p.ow + ox] = bestIdx;
        }
      }
    }
  }

private:
  Pool2D g;
};

std::unique_ptr<Kernel> createMaxPool(const OpSpec &spec, std::string &error) {
  if (!checkSpec(spec, 1, 1, 1, 2, {0}, {0}, error) ||
      !checkDType(spec, false, 1, DType::I64, error))
    return nullptr;
  Pool2D g;
  if (!pool2DGeom(spec, spec.inputs[0], spec.outputs[0], g, error))
    return nullptr;
  if (spec.outputs.size() > 1 &&
      spec.outputs[1].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "Indices must have Y's shape");
    return nullptr;
  }
  return std::make_unique<MaxPoolKernel>(spec, g);
}

/// MaxPoolGrad: dY, Indices -> dX (scatter-add into each plane).
class MaxPoolGradKernel final : public CpuKernel {
public:
  MaxPoolGradKernel(const OpSpec &spec, int64_t planes, int64_t inPlane,
                    int64_t outPlane)
      : CpuKernel(spec), planes(planes), inPlane(inPlane), outPlane(outPlane) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *dy = in[0].as<float>();
    const int64_t *ind = in[1].as<int64_t>();
    float *dx = out[0].as<float>();
    const int64_t np = planes, ip = inPlane, opl = outPlane;
    bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad)
    for (int64_t p = 0; p < np; ++p) {
      float *dxp = dx + p * ip;
      std::fill(dxp, dxp + ip, 0.0f);
      const float *dyp = dy + p * opl;
      const int64_t *idx = ind + p * opl;
      for (int64_t i = 0; i < opl; ++i) {
        if (idx[i] < 0 || idx[i] >= ip) {
          bad = true;
          continue;
        }
        dxp[idx[i]] += dyp[i];
      }
    }
    if (bad)
      fatal(nodeName, op, "an index is outside its (n, c) plane");
  }

private:
  int64_t planes, inPlane, outPlane;
};

std::unique_ptr<Kernel> createMaxPoolGrad(const OpSpec &spec,
                                          std::string &error) {
  if (!checkSpec(spec, 2, 2, 1, 1, {0}, {0}, error))
    return nullptr;
  int64_t planes, inPlane, outPlane;
  if (!maxPoolGradGeom(spec, planes, inPlane, outPlane, error))
    return nullptr;
  return std::make_unique<MaxPoolGradKernel>(spec, planes, inPlane, outPlane);
}

//===----------------------------------------------------------------------===//
// GlobalAveragePool / GlobalAveragePoolGrad
//===----------------------------------------------------------------------===//

class GlobalAvgPoolKernel final : public CpuKernel {
public:
  GlobalAvgPoolKernel(const OpSpec &spec, int64_t planes, int64_t size,
                      bool grad)
      : CpuKernel(spec), planes(planes), size(size), grad(grad) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>();
    float *y = out[0].as<float>();
    const int64_t np = planes, sz = size;
    const float inv = 1.0f / float(sz);
    if (grad) {
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < np; ++p) {
        float v = x[p] * inv;
        std::fill(y + p * sz, y + (p + 1) * sz, v);
      }
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < np; ++p) {
      const float *xp = x + p * sz;
      float acc = 0;
      for (int64_t i = 0; i < sz; ++i)
        acc += xp[i];
      y[p] = acc * inv;
    }
  }

private:
  int64_t planes, size;
  bool grad;
};

std::unique_ptr<Kernel> createGlobalAvgPool(const OpSpec &spec,
                                            std::string &error) {
  bool grad = spec.opType == "GlobalAveragePoolGrad";
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error))
    return nullptr;
  int64_t planes, size;
  if (!globalPoolGeom(spec, grad, SIZE_MAX, planes, size, error))
    return nullptr;
  return std::make_unique<GlobalAvgPoolKernel>(spec, planes, size, grad);
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss / SoftmaxCrossEntropyLossGrad
//===----------------------------------------------------------------------===//

/// scores, labels -> loss[, log_prob].
class SceKernel final : public CpuKernel {
public:
  SceKernel(const OpSpec &spec, const SceGeom &g, bool wantLogProb)
      : CpuKernel(spec), g(g) {
    if (!wantLogProb)
      scratch.resize(size_t(g.n * g.c * g.d));
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[0].as<float>();
    float *lp = scratch.empty() ? out[1].as<float>() : scratch.data();
    float *loss = out[0].as<float>();
    const SceGeom p = g;
    const int64_t rows = p.n * p.d;
    std::vector<float> rowLoss(static_cast<size_t>(rows));
    int64_t badLabel = -1;
    int64_t count = 0;
#pragma omp parallel for schedule(static) reduction(+ : count) reduction(max : badLabel)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t ni = r / p.d, di = r % p.d;
      const float *xr = x + ni * p.c * p.d + di;
      float *lr = lp + ni * p.c * p.d + di;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < p.c; ++c)
        mx = std::max(mx, xr[c * p.d]);
      double s = 0;
      for (int64_t c = 0; c < p.c; ++c)
        s += std::exp(double(xr[c * p.d] - mx));
      float lse = mx + float(std::log(s));
      for (int64_t c = 0; c < p.c; ++c)
        lr[c * p.d] = xr[c * p.d] - lse;
      int64_t lab = labelAt(in[1], r);
      if (p.hasIgnore && lab == p.ignoreIndex) {
        rowLoss[r] = 0;
        continue;
      }
      if (lab < 0 || lab >= p.c) {
        badLabel = std::max(badLabel, r);
        rowLoss[r] = 0;
        continue;
      }
      rowLoss[r] = -lr[lab * p.d];
      ++count;
    }
    if (badLabel >= 0)
      fatal(nodeName, op,
            "label " + std::to_string(labelAt(in[1], badLabel)) + " at " +
                std::to_string(badLabel) + " is outside [0, " +
                std::to_string(p.c) + ")");
    if (p.reduction == SceReduction::None) {
      std::copy(rowLoss.begin(), rowLoss.end(), loss);
      return;
    }
    double total = 0;
    for (float l : rowLoss)
      total += l;
    if (p.reduction == SceReduction::Mean)
      total = count ? total / double(count) : 0.0;
    loss[0] = float(total);
  }

private:
  SceGeom g;
  std::vector<float> scratch;
};

std::unique_ptr<Kernel> createSce(const OpSpec &spec, std::string &error) {
  if (!checkSpec(spec, 2, 2, 1, 2, {0}, {0, 1}, error))
    return nullptr;
  SceGeom g;
  if (!sceGeom(spec, /*grad=*/false, g, error))
    return nullptr;
  return std::make_unique<SceKernel>(spec, g, spec.outputs.size() > 1);
}

/// dLoss, log_prob, labels -> dScores = (softmax - onehot) * dLoss / count.
class SceGradKernel final : public CpuKernel {
public:
  SceGradKernel(const OpSpec &spec, const SceGeom &g) : CpuKernel(spec), g(g) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *dl = in[0].as<float>(), *lp = in[1].as<float>();
    float *dx = out[0].as<float>();
    const SceGeom p = g;
    const int64_t rows = p.n * p.d;
    int64_t count = 0;
    for (int64_t r = 0; r < rows; ++r)
      count += !(p.hasIgnore && labelAt(in[2], r) == p.ignoreIndex);
    float scale = p.reduction == SceReduction::Mean
                      ? (count ? dl[0] / float(count) : 0.0f)
                      : dl[0];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t ni = r / p.d, di = r % p.d;
      const float *lr = lp + ni * p.c * p.d + di;
      float *dr = dx + ni * p.c * p.d + di;
      int64_t lab = labelAt(in[2], r);
      if (p.hasIgnore && lab == p.ignoreIndex) {
        for (int64_t c = 0; c < p.c; ++c)
          dr[c * p.d] = 0;
        continue;
      }
      float s = p.reduction == SceReduction::None ? dl[r] : scale;
      for (int64_t c = 0; c < p.c; ++c)
        dr[c * p.d] = (std::exp(lr[c * p.d]) - (c == lab ? 1.0f : 0.0f)) * s;
    }
  }

private:
  SceGeom g;
};

std::unique_ptr<Kernel> createSceGrad(const OpSpec &spec, std::string &error) {
  if (!checkSpec(spec, 3, 3, 1, 1, {0, 1}, {0}, error))
    return nullptr;
  SceGeom g;
  if (!sceGeom(spec, /*grad=*/true, g, error))
    return nullptr;
  return std::make_unique<SceGradKernel>(spec, g);
}

//===----------------------------------------------------------------------===//
// AveragePool / AveragePoolGrad
//===----------------------------------------------------------------------===//

static bool avgPoolGeom(const OpSpec &spec, const TensorDesc &x,
                        const TensorDesc &y, Window &w, dnnl::algorithm &alg,
                        std::string &error) {
  if (x.rank() < 3 || x.rank() > 5 || y.rank() != x.rank() ||
      x.shape[0] != y.shape[0] || x.shape[1] != y.shape[1]) {
    error = nodeError(spec, "expects N, C, spatial tensors, got " +
                                shapeStr(x.shape) + " -> " + shapeStr(y.shape));
    return false;
  }
  std::vector<int64_t> k;
  if (!poolKernelShape(spec, x.rank() - 2, k, error) ||
      !checkAvgPoolDilations(spec, error))
    return false;
  bool ceil = spec.attrs.getInt("ceil_mode", 0) != 0;
  if (!resolveWindow(spec, spatialDims(x.shape), k, spatialDims(y.shape), ceil,
                     w, error) ||
      !checkAvgPoolCeil(spec, w.paddedForCeil, error))
    return false;
  bool includePad = spec.attrs.getInt("count_include_pad", 0) != 0;
  alg = includePad ? dnnl::algorithm::pooling_avg_include_padding
                   : dnnl::algorithm::pooling_avg_exclude_padding;
  return true;
}

/// AveragePool: X -> Y.
static PlainPrimitive avgPool(const OpSpec &spec, const Window &w,
                              dnnl::algorithm alg) {
  auto xmd = plainDesc(spec.inputs[0].shape),
       ymd = plainDesc(spec.outputs[0].shape);
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, xmd,
                                ymd, w.strides, w.kernel, w.padL, w.padR);
  PlainPrimitive p(dnnl::pooling_forward(
      dnnl::pooling_forward::primitive_desc(d, engine())));
  p.in(DNNL_ARG_SRC, xmd, 0).out(DNNL_ARG_DST, ymd, 0);
  return p;
}

/// AveragePoolGrad: dY -> dX.
static PlainPrimitive avgPoolGrad(const OpSpec &spec, const Window &w,
                                  dnnl::algorithm alg) {
  auto dymd = plainDesc(spec.inputs[0].shape),
       dxmd = plainDesc(spec.outputs[0].shape);
  dnnl::pooling_forward::desc fd(dnnl::prop_kind::forward_training, alg, dxmd,
                                 dymd, w.strides, w.kernel, w.padL, w.padR);
  dnnl::pooling_forward::primitive_desc fpd(fd, engine());
  dnnl::pooling_backward::desc d(alg, dxmd, dymd, w.strides, w.kernel, w.padL,
                                 w.padR);
  PlainPrimitive p(dnnl::pooling_backward(
      dnnl::pooling_backward::primitive_desc(d, engine(), fpd)));
  p.in(DNNL_ARG_DIFF_DST, dymd, 0).out(DNNL_ARG_DIFF_SRC, dxmd, 0);
  return p;
}

static std::unique_ptr<Kernel> createAvgPool(const OpSpec &spec,
                                             std::string &error) {
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error))
    return nullptr;
  Window w;
  dnnl::algorithm alg;
  if (!avgPoolGeom(spec, spec.inputs[0], spec.outputs[0], w, alg, error))
    return nullptr;
  return guardCreate(spec, error, [&] {
    return std::make_unique<PrimitiveKernel>(spec, avgPool(spec, w, alg));
  });
}

static std::unique_ptr<Kernel> createAvgPoolGrad(const OpSpec &spec,
                                                 std::string &error) {
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error))
    return nullptr;
  Window w;
  dnnl::algorithm alg;
  if (!avgPoolGeom(spec, spec.outputs[0], spec.inputs[0], w, alg, error))
    return nullptr;
  return guardCreate(spec, error, [&] {
    return std::make_unique<PrimitiveKernel>(spec, avgPoolGrad(spec, w, alg));
  });
}

} // namespace

void registerPoolingLossKernels(KernelRegistry &r) {
  r["AveragePool"] = createAvgPool;
  r["AveragePoolGrad"] = createAvgPoolGrad;
  r["Dropout"] = createDropout;
  r["DropoutGrad"] = createDropoutGrad;
  r["MaxPool"] = createMaxPool;
  r["MaxPoolGrad"] = createMaxPoolGrad;
  r["GlobalAveragePool"] = createGlobalAvgPool;
  r["GlobalAveragePoolGrad"] = createGlobalAvgPool;
  r["SoftmaxCrossEntropyLoss"] = createSce;
  r["SoftmaxCrossEntropyLossGrad"] = createSceGrad;
}

} // namespace oasr::rt::cpu
