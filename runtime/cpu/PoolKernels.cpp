//===- PoolKernels.cpp - Max, average and global average pooling ----------===//
//
// MaxPool with indices and MaxPoolGrad, GlobalAveragePool(Grad) (own loops)
// and AveragePool(Grad) (oneDNN), the ops of the CUDA backend's
// PoolKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "Dnnl.h"

#include <algorithm>
#include <cstring>

namespace oasr::rt::cpu {

//===----------------------------------------------------------------------===//
// MaxPool / MaxPoolGrad
//===----------------------------------------------------------------------===//

namespace {

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

} // namespace

static KernelOr createMaxPool(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 2, {0}, {0}));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 1, DType::I64));
  Pool2D g;
  OASR_RETURN_IF_ERROR(pool2DGeom(spec, spec.inputs[0], spec.outputs[0], g));
  if (spec.outputs.size() > 1 &&
      spec.outputs[1].shape != spec.outputs[0].shape) {
    return nodeError(spec, "Indices must have Y's shape");
  }
  return std::make_unique<MaxPoolKernel>(spec, g);
}

namespace {

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
      fatalKernelError(nodeName, op, "an index is outside its (n, c) plane");
  }

private:
  int64_t planes, inPlane, outPlane;
};

} // namespace

static KernelOr createMaxPoolGrad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 2, 2, 1, 1, {0}, {0}));
  int64_t planes, inPlane, outPlane;
  OASR_RETURN_IF_ERROR(maxPoolGradGeom(spec, planes, inPlane, outPlane));
  return std::make_unique<MaxPoolGradKernel>(spec, planes, inPlane, outPlane);
}

//===----------------------------------------------------------------------===//
// GlobalAveragePool / GlobalAveragePoolGrad
//===----------------------------------------------------------------------===//

namespace {

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

} // namespace

static KernelOr createGlobalAvgPool(const OpSpec &spec) {
  bool grad = spec.opType == "GlobalAveragePoolGrad";
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  int64_t planes, size;
  OASR_RETURN_IF_ERROR(globalPoolGeom(spec, grad, SIZE_MAX, planes, size));
  return std::make_unique<GlobalAvgPoolKernel>(spec, planes, size, grad);
}

//===----------------------------------------------------------------------===//
// AveragePool / AveragePoolGrad
//===----------------------------------------------------------------------===//

static Status avgPoolGeom(const OpSpec &spec, const TensorDesc &x,
                          const TensorDesc &y, Window &w,
                          dnnl::algorithm &alg) {
  if (x.rank() < 3 || x.rank() > 5 || y.rank() != x.rank() ||
      x.shape[0] != y.shape[0] || x.shape[1] != y.shape[1]) {
    return nodeError(spec, "expects N, C, spatial tensors, got " +
                               shapeStr(x.shape) + " -> " + shapeStr(y.shape));
  }
  std::vector<int64_t> k;
  OASR_RETURN_IF_ERROR(poolKernelShape(spec, x.rank() - 2, k));
  OASR_RETURN_IF_ERROR(checkAvgPoolDilations(spec));
  bool ceil = spec.attrs.getInt("ceil_mode", 0) != 0;
  OASR_RETURN_IF_ERROR(resolveWindow(spec, spatialDims(x.shape), k,
                                     spatialDims(y.shape), ceil, w));
  OASR_RETURN_IF_ERROR(checkAvgPoolCeil(spec, w.paddedForCeil));
  bool includePad = spec.attrs.getInt("count_include_pad", 0) != 0;
  alg = includePad ? dnnl::algorithm::pooling_avg_include_padding
                   : dnnl::algorithm::pooling_avg_exclude_padding;
  return Status::success();
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

static KernelOr createAvgPool(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  Window w;
  dnnl::algorithm alg;
  OASR_RETURN_IF_ERROR(
      avgPoolGeom(spec, spec.inputs[0], spec.outputs[0], w, alg));
  return guardCreate(spec, [&] {
    return std::make_unique<PrimitiveKernel>(spec, avgPool(spec, w, alg));
  });
}

static KernelOr createAvgPoolGrad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {0}, {0}));
  Window w;
  dnnl::algorithm alg;
  OASR_RETURN_IF_ERROR(
      avgPoolGeom(spec, spec.outputs[0], spec.inputs[0], w, alg));
  return guardCreate(spec, [&] {
    return std::make_unique<PrimitiveKernel>(spec, avgPoolGrad(spec, w, alg));
  });
}

void registerPoolKernels(KernelRegistry &r) {
  r["MaxPool"] = createMaxPool;
  r["MaxPoolGrad"] = createMaxPoolGrad;
  r["AveragePool"] = createAvgPool;
  r["AveragePoolGrad"] = createAvgPoolGrad;
  r["GlobalAveragePool"] = createGlobalAvgPool;
  r["GlobalAveragePoolGrad"] = createGlobalAvgPool;
}

} // namespace oasr::rt::cpu
