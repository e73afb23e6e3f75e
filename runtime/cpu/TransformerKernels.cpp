//===- TransformerKernels.cpp - Embedding, layer norm and GELU ------------===//
//
// The transformer ops' kernels: Gather/GatherGrad (embedding lookups and
// their scatter-add), Softmax/LogSoftmax and Gelu/GeluGrad/Erf, with their
// gradients (LayerNormalization is NormKernels.cpp's).
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
// Gather / GatherGrad
//===----------------------------------------------------------------------===//

/// data [outer, axisDim, inner] gathered along the middle dimension.
struct GatherGeom {
  int64_t outer = 1, axisDim = 1, inner = 1, numIdx = 1;
};

bool gatherGeom(const OpSpec &spec, const TensorDesc &data,
                const TensorDesc &idx, const TensorDesc &y, GatherGeom &g,
                std::string &error) {
  int64_t axis;
  if (!normAxis(spec, int64_t(data.rank()), 0, axis, error))
    return false;
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32) {
    error = nodeError(spec, "indices must be i64 or i32");
    return false;
  }
  std::vector<int64_t> want(data.shape.begin(), data.shape.begin() + axis);
  want.insert(want.end(), idx.shape.begin(), idx.shape.end());
  want.insert(want.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (y.shape != want || y.dtype != data.dtype) {
    error = nodeError(spec, "gathered shape " + shapeStr(y.shape) +
                                " should be " + shapeStr(want));
    return false;
  }
  for (int64_t k = 0; k < axis; ++k)
    g.outer *= data.shape[k];
  g.axisDim = data.shape[axis];
  for (size_t k = axis + 1; k < data.rank(); ++k)
    g.inner *= data.shape[k];
  g.numIdx = idx.numel();
  return true;
}

/// Gather {axis}: data, indices -> Y (negative indices count from the end).
class GatherKernel final : public CpuKernel {
public:
  GatherKernel(const OpSpec &spec, const GatherGeom &g, bool grad)
      : CpuKernel(spec), g(g), grad(grad),
        esize(dtypeSize(grad ? spec.outputs[0].dtype : spec.inputs[0].dtype)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const TensorRef &idx = in[1];
    const GatherGeom p = g;
    // Resolve indices once.
    std::vector<int64_t> ix(size_t(p.numIdx));
    for (int64_t i = 0; i < p.numIdx; ++i) {
      int64_t v = labelAt(idx, i);
      if (v < 0)
        v += p.axisDim;
      if (v < 0 || v >= p.axisDim)
        fatal(nodeName, op,
              "index " + std::to_string(labelAt(idx, i)) + " is outside [0, " +
                  std::to_string(p.axisDim) + ")");
      ix[size_t(i)] = v;
    }
    if (!grad) {
      const char *x = static_cast<const char *>(in[0].data);
      char *y = static_cast<char *>(out[0].data);
      const size_t rowBytes = size_t(p.inner) * esize;
      const int64_t units = p.outer * p.numIdx;
#pragma omp parallel for schedule(static) if (units * p.inner > 16384)
      for (int64_t u = 0; u < units; ++u) {
        int64_t o = u / p.numIdx, i = u % p.numIdx;
        std::memcpy(y + size_t(u) * rowBytes,
                    x + size_t(o * p.axisDim + ix[size_t(i)]) * rowBytes,
                    rowBytes);
      }
      return;
    }
    // GatherGrad: shape, indices, dY -> dX (zero, then scatter-add); each
    // thread owns whole (outer, column block) slices so no two write alike.
    const float *dy = in[2].as<float>();
    float *dx = out[0].as<float>();
    std::memset(dx, 0, out[0].bytes());
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (p.inner + kBlock - 1) / kBlock;
    const int64_t units = p.outer * blocks;
#pragma omp parallel for schedule(static) if (units > 1)
    for (int64_t u = 0; u < units; ++u) {
      int64_t o = u / blocks, c0 = (u % blocks) * kBlock;
      int64_t c1 = std::min(p.inner, c0 + kBlock);
      for (int64_t i = 0; i < p.numIdx; ++i) {
        const float *src = dy + (o * p.numIdx + i) * p.inner;
        float *dst = dx + (o * p.axisDim + ix[size_t(i)]) * p.inner;
        for (int64_t c = c0; c < c1; ++c)
          dst[c] += src[c];
      }
    }
  }

private:
  GatherGeom g;
  bool grad;
  size_t esize;
};

std::unique_ptr<Kernel> createGather(const OpSpec &spec, std::string &error) {
  if (!checkArity(spec, 2, 2, 1, 1, error))
    return nullptr;
  GatherGeom g;
  if (!gatherGeom(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0], g,
                  error))
    return nullptr;
  return std::make_unique<GatherKernel>(spec, g, false);
}

std::unique_ptr<Kernel> createGatherGrad(const OpSpec &spec,
                                         std::string &error) {
  if (!checkSpec(spec, 3, 3, 1, 1, {2}, {0}, error))
    return nullptr;
  GatherGeom g;
  if (!gatherGeom(spec, spec.outputs[0], spec.inputs[1], spec.inputs[2], g,
                  error))
    return nullptr;
  return std::make_unique<GatherKernel>(spec, g, true);
}

//===----------------------------------------------------------------------===//
// Gelu / GeluGrad / Erf
//===----------------------------------------------------------------------===//

/// Gelu {approximate = none | tanh}, GeluGrad (dY, X -> dX), Erf.
class GeluKernel final : public CpuKernel {
public:
  GeluKernel(const OpSpec &spec, int mode, bool grad)
      : CpuKernel(spec), mode(mode), grad(grad), n(spec.outputs[0].numel()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const float *x = in[grad ? 1 : 0].as<float>();
    const float *dy = grad ? in[0].as<float>() : nullptr;
    float *y = out[0].as<float>();
    const int64_t count = n;
    const int md = mode;
    const bool gr = grad;
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    constexpr float kInvSqrt2Pi = 0.39894228040143268f;
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (int64_t i = 0; i < count; ++i) {
      float v = x[i];
      if (md == 2) { // Erf
        y[i] = std::erf(v);
        continue;
      }
      if (md == 0) {
        float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
        y[i] = gr ? dy[i] * (cdf + v * kInvSqrt2Pi * std::exp(-0.5f * v * v))
                  : v * cdf;
      } else {
        float u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
        float t = std::tanh(u);
        y[i] = gr ? dy[i] * (0.5f * (1.0f + t) +
                             0.5f * v * (1.0f - t * t) * kSqrt2OverPi *
                                 (1.0f + 3.0f * 0.044715f * v * v))
                  : 0.5f * v * (1.0f + t);
      }
    }
  }

private:
  int mode; // 0: erf Gelu, 1: tanh Gelu, 2: Erf
  bool grad;
  int64_t n;
};

std::unique_ptr<Kernel> createGelu(const OpSpec &spec, std::string &error) {
  bool grad = spec.opType == "GeluGrad";
  size_t nIn = grad ? 2 : 1;
  int mode = 2;
  if (spec.opType != "Erf") {
    std::string approx = spec.attrs.getString("approximate", "none");
    if (approx != "none" && approx != "tanh") {
      error = nodeError(spec, "approximate '" + approx + "' is not supported");
      return nullptr;
    }
    mode = approx == "tanh" ? 1 : 0;
    if (!spec.inputs.empty() && spec.inputs[0].dtype == DType::BF16 &&
        checkArity(spec, nIn, nIn, 1, 1, error) &&
        checkSameShapes(spec, nIn, error))
      return createDnnlGelu(spec, mode == 1, grad, error);
  }
  if (!checkSameShapeF32(spec, nIn, error))
    return nullptr;
  return std::make_unique<GeluKernel>(spec, mode, grad);
}

//===----------------------------------------------------------------------===//
// Softmax / LogSoftmax and their gradients
//===----------------------------------------------------------------------===//

static bool softmaxAxis(const OpSpec &spec, const TensorDesc &x, int &axis,
                        std::string &error) {
  int64_t r = int64_t(x.rank());
  int64_t a = spec.attrs.getInt("axis", -1);
  if (a < 0)
    a += r;
  if (r == 0 || a < 0 || a >= r) {
    error = nodeError(spec, "axis " +
                                std::to_string(spec.attrs.getInt("axis", -1)) +
                                " out of range for " + shapeStr(x.shape));
    return false;
  }
  axis = int(a);
  return true;
}

/// Softmax / LogSoftmax: X -> Y.
static std::unique_ptr<Kernel> softmaxKernel(const OpSpec &spec, int axis,
                                             bool log) {
  auto md = plainDesc(spec.inputs[0].shape);
  if (log)
    return forwardKernel(
        spec,
        dnnl::logsoftmax_forward(dnnl::logsoftmax_forward::primitive_desc(
            dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_training,
                                           md, axis),
            engine())),
        md);
  return forwardKernel(
      spec,
      dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
          dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, md,
                                      axis),
          engine())),
      md);
}

/// SoftmaxGrad / LogSoftmaxGrad: dY, Y -> dX.
static std::unique_ptr<Kernel> softmaxGradKernel(const OpSpec &spec, int axis,
                                                 bool log) {
  auto md = plainDesc(spec.inputs[0].shape);
  if (log) {
    dnnl::logsoftmax_forward::primitive_desc fpd(
        dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_training, md,
                                       axis),
        engine());
    return backwardKernel(
        spec,
        dnnl::logsoftmax_backward(dnnl::logsoftmax_backward::primitive_desc(
            dnnl::logsoftmax_backward::desc(md, md, axis), engine(), fpd)),
        md);
  }
  dnnl::softmax_forward::primitive_desc fpd(
      dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, md, axis),
      engine());
  return backwardKernel(
      spec,
      dnnl::softmax_backward(dnnl::softmax_backward::primitive_desc(
          dnnl::softmax_backward::desc(md, md, axis), engine(), fpd)),
      md);
}

static std::unique_ptr<Kernel> createSoftmax(const OpSpec &spec,
                                             std::string &error) {
  bool grad = spec.opType.find("Grad") != std::string::npos;
  bool log = spec.opType.rfind("Log", 0) == 0;
  size_t nIn = grad ? 2 : 1;
  if (!checkSameShapeF32(spec, nIn, error))
    return nullptr;
  int axis;
  if (!softmaxAxis(spec, spec.outputs[0], axis, error))
    return nullptr;
  return guardCreate(spec, error, [&] {
    return grad ? softmaxGradKernel(spec, axis, log)
                : softmaxKernel(spec, axis, log);
  });
}

} // namespace

void registerTransformerKernels(KernelRegistry &r) {
  for (const char *op :
       {"Softmax", "LogSoftmax", "SoftmaxGrad", "LogSoftmaxGrad",
        "SoftmaxGrad_13", "LogSoftmaxGrad_13"})
    r[op] = createSoftmax;
  r["Gather"] = createGather;
  r["GatherGrad"] = createGatherGrad;
  for (const char *op : {"Gelu", "GeluGrad", "Erf"})
    r[op] = createGelu;
}

} // namespace oasr::rt::cpu
