//===- DropoutKernels.cpp - Dropout and its gradient ----------------------===//
//
// Dropout/DropoutGrad with a counter-based mask (dropoutKeeps), the ops of
// the CUDA backend's DropoutKernels.cpp, which draws the same mask.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <cstring>

namespace oasr::rt::cpu {

//===----------------------------------------------------------------------===//
// Dropout / DropoutGrad
//===----------------------------------------------------------------------===//

namespace {

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
      fatalKernelError(nodeName, op,
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
    const float scale = dropoutScale(ratio);
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i) {
      bool keep = dropoutKeeps(stepKey, uint64_t(i), threshold);
      y[i] = dropoutValue(keep, x, i, scale);
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

} // namespace

static KernelOr createDropout(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkDropout(spec));
  return std::make_unique<DropoutKernel>(spec);
}

namespace {

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
    const float scale = dropoutScale(ratio);
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i)
      dx[i] = dropoutValue(mask[i], dy, i, scale);
  }

private:
  int64_t n;
  double defaultRatio;
};

} // namespace

static KernelOr createDropoutGrad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkDropoutGrad(spec));
  return std::make_unique<DropoutGradKernel>(spec);
}

void registerDropoutKernels(KernelRegistry &r) {
  r["Dropout"] = createDropout;
  r["DropoutGrad"] = createDropoutGrad;
}

} // namespace oasr::rt::cpu
