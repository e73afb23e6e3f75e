//===- LossKernels.cpp - Softmax cross-entropy and its gradient -----------===//
//
// SoftmaxCrossEntropyLoss and SoftmaxCrossEntropyLossGrad, the ops of the
// CUDA backend's LossKernels.cpp: log-softmax over the classes with the sum
// in double, the mean, sum or per-element loss, ignore_index and label
// smoothing.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace oasr::rt::cpu {

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss / SoftmaxCrossEntropyLossGrad
//===----------------------------------------------------------------------===//

namespace {

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
      double lpSum = 0;
      if (p.labelSmoothing > 0)
        for (int64_t c = 0; c < p.c; ++c)
          lpSum += double(lr[c * p.d]);
      rowLoss[r] = sceLossAt(lr[lab * p.d], lpSum, p.labelSmoothing, p.c);
      ++count;
    }
    if (badLabel >= 0)
      fatalDataError(nodeName, op,
                     "label " + std::to_string(labelAt(in[1], badLabel)) +
                         " at " + std::to_string(badLabel) +
                         " is outside [0, " + std::to_string(p.c) + ")");
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

} // namespace

static KernelOr createSce(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 2, 2, 1, 2, {0}, {0, 1}));
  SceGeom g;
  OASR_RETURN_IF_ERROR(sceGeom(spec, /*grad=*/false, g));
  return std::make_unique<SceKernel>(spec, g, spec.outputs.size() > 1);
}

namespace {

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
        dr[c * p.d] =
            sceGradAt(lr[c * p.d], c == lab, s, p.labelSmoothing, p.c);
    }
  }

private:
  SceGeom g;
};

} // namespace

static KernelOr createSceGrad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 3, 3, 1, 1, {0, 1}, {0}));
  SceGeom g;
  OASR_RETURN_IF_ERROR(sceGeom(spec, /*grad=*/true, g));
  return std::make_unique<SceGradKernel>(spec, g);
}

void registerLossKernels(KernelRegistry &r) {
  r["SoftmaxCrossEntropyLoss"] = createSce;
  r["SoftmaxCrossEntropyLossGrad"] = createSceGrad;
}

} // namespace oasr::rt::cpu
