//===- LossKernels.cpp - Softmax cross-entropy on the GPU -----------------===//
//
// SoftmaxCrossEntropyLoss and its gradient, the ops of the CPU backend's
// LossKernels.cpp; device code in CudaKernels.cu.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

namespace oasr::rt::cuda {

namespace {

class SceKernel final : public CudaKernel {
public:
  SceKernel(CudaBackend &be, const OpSpec &spec, const SceGeom &p)
      : CudaKernel(be, spec), p(p) {
    size_t rows = size_t(p.n * p.d);
    lossAt = reserve(rows * sizeof(float));
    countAt = reserve(rows * sizeof(int));
    if (spec.outputs.size() < 2)
      logProbAt = reserve(size_t(p.n * p.c * p.d) * sizeof(float));
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    float *lp =
        out.size() > 1 ? out[1].as<float>() : scratchAt<float>(logProbAt);
    launchSce(p, in[0].as<float>(), in[1].data, out[0].as<float>(), lp,
              scratchAt<float>(lossAt), scratchAt<int>(countAt), stream);
  }

private:
  SceGeom p;
  size_t lossAt = 0, countAt = 0, logProbAt = 0;
};

} // namespace

static KernelOr createSce(CudaBackend &be, const OpSpec &spec) {
  SceGeom p;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 2, 2, 1, 2, {0}, {0, 1}));
  OASR_RETURN_IF_ERROR(sceGeom(spec, /*grad=*/false, p));
  return std::make_unique<SceKernel>(be, spec, p);
}

namespace {

class SceGradKernel final : public CudaKernel {
public:
  SceGradKernel(CudaBackend &be, const OpSpec &spec, const SceGeom &p)
      : CudaKernel(be, spec), p(p) {
    countAt = reserve(sizeof(int));
  }
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    launchSceGrad(p, in[0].as<float>(), in[1].as<float>(), in[2].data,
                  out[0].as<float>(), scratchAt<int>(countAt), stream);
  }

private:
  SceGeom p;
  size_t countAt = 0;
};

} // namespace

static KernelOr createSceGrad(CudaBackend &be, const OpSpec &spec) {
  SceGeom p;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 3, 3, 1, 1, {0, 1}, {0}));
  OASR_RETURN_IF_ERROR(sceGeom(spec, /*grad=*/true, p));
  return std::make_unique<SceGradKernel>(be, spec, p);
}

void registerLossKernels(FactoryRegistry &r) {
  r["SoftmaxCrossEntropyLoss"] = createSce;
  r["SoftmaxCrossEntropyLossGrad"] = createSceGrad;
}

} // namespace oasr::rt::cuda
