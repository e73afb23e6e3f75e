//===- PoolKernels.cpp - Max, average and global average pooling ----------===//
//
// MaxPool/AveragePool/GlobalAveragePool and their gradients, the ops of the
// CPU backend's PoolKernels.cpp; device code in CudaKernels.cu.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace oasr::rt::cuda {

/// MaxPool / AveragePool geometry (1-D and 2-D).
static Status poolGeom(const OpSpec &spec, const TensorDesc &x,
                       const TensorDesc &y, bool avg, Pool2D &g) {
  if (avg)
    OASR_RETURN_IF_ERROR(checkAvgPoolDilations(spec));
  OASR_RETURN_IF_ERROR(pool2DGeom(spec, x, y, g));
  if (avg)
    OASR_RETURN_IF_ERROR(checkAvgPoolCeil(spec, g.paddedForCeil));
  return Status::success();
}

static KernelOr createMaxPool(CudaBackend &be, const OpSpec &spec) {
  Pool2D g;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 2, {0}, {0}));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 1, DType::I64));
  OASR_RETURN_IF_ERROR(
      poolGeom(spec, spec.inputs[0], spec.outputs[0], false, g));
  if (spec.outputs.size() > 1 &&
      spec.outputs[1].shape != spec.outputs[0].shape) {
    return nodeError(spec, "Indices must have Y's shape");
  }
  return lambda(be, spec, [g](cudaStream_t s, const auto &in, const auto &out) {
    launchMaxPool(g, in[0].template as<float>(), out[0].template as<float>(),
                  out.size() > 1 ? out[1].template as<int64_t>() : nullptr, s);
  });
}

static KernelOr createMaxPoolGrad(CudaBackend &be, const OpSpec &spec) {
  int64_t planes, inPlane, outPlane;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 2, 2, 1, 1, {0}, {0}));
  OASR_RETURN_IF_ERROR(maxPoolGradGeom(spec, planes, inPlane, outPlane));
  // The forward's attributes give each dX element its windows: a thread
  // per element. Without them (or with a geometry they do not fit), a
  // thread per plane scatters.
  Pool2D g;
  if (pool2DGeom(spec, spec.outputs[0], spec.inputs[0], g).ok() &&
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

static KernelOr createAvgPool(CudaBackend &be, const OpSpec &spec) {
  bool grad = spec.opType == "AveragePoolGrad";
  Pool2D g;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  OASR_RETURN_IF_ERROR(poolGeom(spec, grad ? spec.outputs[0] : spec.inputs[0],
                                grad ? spec.inputs[0] : spec.outputs[0], true,
                                g));
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
static KernelOr createGlobalAvgPool(CudaBackend &be, const OpSpec &spec) {
  bool grad = spec.opType == "GlobalAveragePoolGrad";
  int64_t planes, size;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  OASR_RETURN_IF_ERROR(globalPoolGeom(spec, grad, kMaxRank, planes, size));
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

void registerPoolKernels(FactoryRegistry &r) {
  r["MaxPool"] = createMaxPool;
  r["MaxPoolGrad"] = createMaxPoolGrad;
  r["AveragePool"] = createAvgPool;
  r["AveragePoolGrad"] = createAvgPool;
  r["GlobalAveragePool"] = createGlobalAvgPool;
  r["GlobalAveragePoolGrad"] = createGlobalAvgPool;
}

} // namespace oasr::rt::cuda
