//===- PoolingLossKernels.cpp - Pooling, loss and Dropout -----------------===//
//
// MaxPool/AveragePool/GlobalAveragePool and their gradients, softmax
// cross-entropy and its gradient, Dropout/DropoutGrad: the CPU backend's
// PoolingLossKernels.cpp family; device code in CudaKernels.cu.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

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

std::unique_ptr<Kernel> createSce(CudaBackend &be, const OpSpec &spec,
                                  std::string &error) {
  SceGeom p;
  if (!checkSpec(spec, 2, 2, 1, 2, {0}, {0, 1}, error) ||
      !sceGeom(spec, /*grad=*/false, p, error))
    return nullptr;
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

std::unique_ptr<Kernel> createSceGrad(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  SceGeom p;
  if (!checkSpec(spec, 3, 3, 1, 1, {0, 1}, {0}, error) ||
      !sceGeom(spec, /*grad=*/true, p, error))
    return nullptr;
  return std::make_unique<SceGradKernel>(be, spec, p);
}

namespace {

/// MaxPool / AveragePool geometry (1-D and 2-D).
bool poolGeom(const OpSpec &spec, const TensorDesc &x, const TensorDesc &y,
              bool avg, Pool2D &g, std::string &error) {
  return (!avg || checkAvgPoolDilations(spec, error)) &&
         pool2DGeom(spec, x, y, g, error) &&
         (!avg || checkAvgPoolCeil(spec, g.paddedForCeil, error));
}

} // namespace

std::unique_ptr<Kernel> createMaxPool(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  Pool2D g;
  if (!checkSpec(spec, 1, 1, 1, 2, {0}, {0}, error) ||
      !checkDType(spec, false, 1, DType::I64, error) ||
      !poolGeom(spec, spec.inputs[0], spec.outputs[0], false, g, error))
    return nullptr;
  if (spec.outputs.size() > 1 &&
      spec.outputs[1].shape != spec.outputs[0].shape) {
    error = nodeError(spec, "Indices must have Y's shape");
    return nullptr;
  }
  return lambda(be, spec, [g](cudaStream_t s, const auto &in, const auto &out) {
    launchMaxPool(g, in[0].template as<float>(), out[0].template as<float>(),
                  out.size() > 1 ? out[1].template as<int64_t>() : nullptr, s);
  });
}

std::unique_ptr<Kernel> createMaxPoolGrad(CudaBackend &be, const OpSpec &spec,
                                          std::string &error) {
  int64_t planes, inPlane, outPlane;
  if (!checkSpec(spec, 2, 2, 1, 1, {0}, {0}, error) ||
      !maxPoolGradGeom(spec, planes, inPlane, outPlane, error))
    return nullptr;
  // The forward's attributes give each dX element its windows: a thread
  // per element. Without them (or with a geometry they do not fit), a
  // thread per plane scatters.
  Pool2D g;
  std::string noGeometry;
  if (pool2DGeom(spec, spec.outputs[0], spec.inputs[0], g, noGeometry) &&
      g.planes == planes && g.ih * g.iw == inPlane && g.oh * g.ow == outPlane)
    return lambda(be, spec,
                  [g](cudaStream_t s, const auto &in, const auto &out) {
                    launchMaxPoolGrad(g, in[0].template as<float>(),
                                      in[1].template as<int64_t>(),
                                      out[0].template as<float>(), s);
                  });
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchMaxPoolGrad(planes, inPlane, outPlane, in[0].template as<float>(),
                      in[1].template as<int64_t>(), out[0].template as<float>(),
                      s);
  });
}

std::unique_ptr<Kernel> createAvgPool(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  bool grad = spec.opType == "AveragePoolGrad";
  Pool2D g;
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error) ||
      !poolGeom(spec, grad ? spec.outputs[0] : spec.inputs[0],
                grad ? spec.inputs[0] : spec.outputs[0], true, g, error))
    return nullptr;
  return lambda(be, spec,
                [g, grad](cudaStream_t s, const auto &in, const auto &out) {
                  if (grad)
                    launchAvgPoolGrad(g, in[0].template as<float>(),
                                      out[0].template as<float>(), s);
                  else
                    launchAvgPool(g, in[0].template as<float>(),
                                  out[0].template as<float>(), s);
                });
}

/// GlobalAveragePool (a per-plane mean) and its gradient (the mean spread
/// back over the plane).
std::unique_ptr<Kernel> createGlobalAvgPool(CudaBackend &be, const OpSpec &spec,
                                            std::string &error) {
  bool grad = spec.opType == "GlobalAveragePoolGrad";
  int64_t planes, size;
  if (!checkSpec(spec, 1, 1, 1, 1, {0}, {0}, error) ||
      !globalPoolGeom(spec, grad, kMaxRank, planes, size, error))
    return nullptr;
  const TensorDesc &x = grad ? spec.outputs[0] : spec.inputs[0];
  std::vector<int64_t> kept(x.rank(), 1);
  kept[0] = x.shape[0];
  kept[1] = x.shape[1];
  float inv = 1.0f / float(size);
  if (!grad) {
    Reduction r;
    makeReduction(x.shape, kept, r);
    return lambda(be, spec,
                  [=](cudaStream_t s, const auto &in, const auto &out) {
                    launchReduce(r, in[0].template as<float>(), inv,
                                 out[0].template as<float>(), planes, s);
                  });
  }
  Broadcast b;
  b.rank = int(x.rank());
  b.operands = 1;
  for (size_t d = 0; d < x.rank(); ++d)
    b.dims[d] = x.shape[d];
  broadcastStrides(kept, x.shape, b.strides[0]);
  int64_t n = x.numel();
  return lambda(be, spec,
                [=](cudaStream_t s, const auto &in, const auto &out) mutable {
                  b.x[0] = in[0].data;
                  launchExpand(b, inv, out[0].template as<float>(), n, s);
                });
}

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
      fatalAt(nodeName, op,
              "ratio " + std::to_string(ratio) + " is outside [0, 1]");
    uint8_t *mask = out.size() > 1 ? out[1].as<uint8_t>() : nullptr;
    if (training == 0 || ratio == 0) {
      backend.copyWithin(out[0].data, in[0].data, out[0].bytes());
      if (mask)
        check(cudaMemsetAsync(mask, 1, size_t(n), stream), nodeName.c_str());
      return;
    }
    float scale = ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
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

std::unique_ptr<Kernel> createDropout(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  if (!checkDropout(spec, error))
    return nullptr;
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
    float scale = ratio < 1 ? float(1.0 / (1.0 - ratio)) : 0.0f;
    launchDropoutGrad(scale, in[0].as<float>(), in[1].as<uint8_t>(),
                      out[0].as<float>(), n, stream);
  }

private:
  int64_t n;
  double defaultRatio;
  HostOperands operands;
};

} // namespace

std::unique_ptr<Kernel> createDropoutGrad(CudaBackend &be, const OpSpec &spec,
                                          std::string &error) {
  if (!checkDropoutGrad(spec, error))
    return nullptr;
  return std::make_unique<DropoutGradKernel>(be, spec);
}

} // namespace oasr::rt::cuda
