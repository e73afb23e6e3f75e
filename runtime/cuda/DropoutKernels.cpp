//===- DropoutKernels.cpp - Dropout and its gradient on the GPU -----------===//
//
// Dropout/DropoutGrad, the ops of the CPU backend's DropoutKernels.cpp,
// with its mask bit for bit (dropoutKeeps); device code in CudaKernels.cu.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <string>

namespace oasr::rt::cuda {

namespace {

/// Dropout: X[, ratio[, training_mode]] -> Y[, mask], the CPU backend's
/// mask bit for bit (dropoutKeeps); every run is a new step.
class DropoutKernel final : public CudaKernel {
public:
  DropoutKernel(CudaBackend &be, const OpSpec &spec)
      : CudaKernel(be, spec), seed(spec.seed), n(spec.inputs[0].numel()),
        defaultRatio(spec.attrs.getFloat("ratio", 0.5)),
        defaultTraining(spec.attrs.getInt("training_mode", 0) != 0),
        operands(be, spec) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double ratio = defaultRatio, training = defaultTraining;
    operands.scalar(in, 1, ratio);
    operands.scalar(in, 2, training);
    if (ratio < 0 || ratio > 1)
      fatalKernelError(nodeName, op,
                       "ratio " + std::to_string(ratio) + " is outside [0, 1]");
    uint8_t *mask = out.size() > 1 ? out[1].as<uint8_t>() : nullptr;
    if (training == 0 || ratio == 0) {
      backend.copyWithin(out[0].data, in[0].data, out[0].bytes());
      if (mask)
        check(cudaMemsetAsync(mask, 1, size_t(n), stream), "cudaMemsetAsync");
      return;
    }
    float scale = dropoutScale(ratio);
    launchDropout(dropoutStepKey(seed, step++), dropoutThreshold(ratio), scale,
                  in[0].as<float>(), out[0].as<float>(), mask, n, stream);
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
  HostOperands operands;
};

} // namespace

static KernelOr createDropout(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkDropout(spec));
  return std::make_unique<DropoutKernel>(be, spec);
}

namespace {

/// DropoutGrad: dY, mask[, ratio[, training_mode]] -> dX = dY * mask /
/// (1 - ratio).
class DropoutGradKernel final : public CudaKernel {
public:
  DropoutGradKernel(CudaBackend &be, const OpSpec &spec)
      : CudaKernel(be, spec), n(spec.inputs[0].numel()),
        defaultRatio(spec.attrs.getFloat("ratio", 0.5)), operands(be, spec) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    double ratio = defaultRatio, training = 1;
    operands.scalar(in, 2, ratio);
    operands.scalar(in, 3, training);
    if (training == 0) {
      backend.copyWithin(out[0].data, in[0].data, out[0].bytes());
      return;
    }
    float scale = dropoutScale(ratio);
    launchDropoutGrad(scale, in[0].as<float>(), in[1].as<uint8_t>(),
                      out[0].as<float>(), n, stream);
  }

private:
  int64_t n;
  double defaultRatio;
  HostOperands operands;
};

} // namespace

static KernelOr createDropoutGrad(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkDropoutGrad(spec));
  return std::make_unique<DropoutGradKernel>(be, spec);
}

void registerDropoutKernels(FactoryRegistry &r) {
  r["Dropout"] = createDropout;
  r["DropoutGrad"] = createDropoutGrad;
}

} // namespace oasr::rt::cuda
