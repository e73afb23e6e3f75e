//===- PointwiseKernels.cpp - Activations, comparisons, softmax -----------===//
//
// Relu, the unary activations and their gradients, Clip, comparisons and
// logic, Where, and Softmax/LogSoftmax with their gradients: the ops of the
// CPU backend's PointwiseKernels.cpp; device code in CudaPointwise.cu
// (Relu in CudaKernels.cu).
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace oasr::rt::cuda {

static KernelOr createRelu(CudaBackend &be, const OpSpec &spec) {
  bool grad = spec.opType == "ReluGrad";
  DType t = sameLowFloat(spec, DType::BF16) ? DType::BF16 : DType::F32;
  OASR_RETURN_IF_ERROR(checkArity(spec, grad ? 2 : 1, grad ? 2 : 1, 1, 1));
  if (t == DType::F32)
    OASR_RETURN_IF_ERROR(checkAllF32(spec, {0, 1}, {0}));
  int64_t n = spec.outputs[0].numel();
  for (const TensorDesc &d : spec.inputs)
    if (d.numel() != n) {
      return nodeError(spec, "operands and result must have the same size");
    }
  if (grad)
    return lambda(
        be, spec, [n, t](cudaStream_t s, const auto &in, const auto &out) {
          launchReluGrad(t, in[0].data, in[1].data, out[0].data, n, s);
        });
  return lambda(be, spec,
                [n, t](cudaStream_t s, const auto &in, const auto &out) {
                  launchRelu(t, in[0].data, out[0].data, n, s);
                });
}

static KernelOr createUnary(CudaBackend &be, const OpSpec &spec) {
  UnaryOp op = *opNamed(kUnaryOps, spec.opType);
  bool tanh = false;
  if (op == UnaryOp::GeluErf)
    OASR_RETURN_IF_ERROR(geluIsTanh(spec, tanh));
  if (tanh)
    op = UnaryOp::GeluTanh;
  OASR_RETURN_IF_ERROR(checkSameShapeF32(bf16AsF32(spec), 1));
  auto [a, b] = activationParams(spec, op);
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [op, a, b, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchUnary(op, floatAt(in, 0), floatAt(out, 0), n, a, b, s);
                });
}

/// <Op>Grad(dY, z) -> dX; ClipGrad takes its bounds from min/max.
static KernelOr createGradOp(CudaBackend &be, const OpSpec &spec) {
  GradOp op = *opNamed(kGradOps, spec.opType);
  bool tanh = false;
  if (op == GradOp::GeluErf)
    OASR_RETURN_IF_ERROR(geluIsTanh(spec, tanh));
  if (tanh)
    op = GradOp::GeluTanh;
  OASR_RETURN_IF_ERROR(checkSameShapeF32(bf16AsF32(spec), 2));
  std::pair<float, float> ab =
      op == GradOp::Clip
          ? std::pair{float(spec.attrs.getFloat("min", -INFINITY)),
                      float(spec.attrs.getFloat("max", INFINITY))}
          : activationParams(spec, op == GradOp::LeakyRelu ? UnaryOp::LeakyRelu
                                   : op == GradOp::HardSigmoid
                                       ? UnaryOp::HardSigmoid
                                       : UnaryOp::Elu);
  float a = ab.first, b = ab.second;
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [op, a, b, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchGrad(op, floatAt(in, 0), floatAt(in, 1),
                             floatAt(out, 0), n, a, b, s);
                });
}

static KernelOr createCompare(CudaBackend &be, const OpSpec &spec) {
  CmpOp op = *opNamed(kCmpOps, spec.opType);
  Broadcast b;
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, DType::Bool));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, spec.inputs[0].dtype));
  OASR_RETURN_IF_ERROR(makeBroadcast(spec, spec.outputs[0].shape, b));
  DType t = spec.inputs[0].dtype;
  int64_t n = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [op, t, b, n](cudaStream_t s, const auto &in, const auto &out) mutable {
        b.x[0] = in[0].data;
        b.x[1] = in[1].data;
        launchCompare(op, t, b, out[0].template as<uint8_t>(), n, s);
      });
}

static KernelOr createNot(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, DType::Bool));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, DType::Bool));
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec, [n](cudaStream_t s, const auto &in, const auto &out) {
    launchNot(in[0].template as<uint8_t>(), out[0].template as<uint8_t>(), n,
              s);
  });
}

static KernelOr createWhere(CudaBackend &be, const OpSpec &spec) {
  Broadcast b;
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, DType::Bool));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, spec.outputs[0].dtype));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 2, spec.outputs[0].dtype));
  OASR_RETURN_IF_ERROR(makeBroadcast(spec, spec.outputs[0].shape, b));
  size_t elem = dtypeSize(spec.outputs[0].dtype);
  int64_t n = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [b, elem, n](cudaStream_t s, const auto &in, const auto &out) mutable {
        for (int j = 0; j < 3; ++j)
          b.x[j] = in[size_t(j)].data;
        launchWhere(b, elem, out[0].data, n, s);
      });
}

/// The [outer, axis, inner] rows of a softmax over `axis` of `shape`.
static RowParams softmaxRows(const std::vector<int64_t> &shape, int64_t axis) {
  RowParams p;
  int64_t rank = int64_t(shape.size());
  if (axis < 0)
    axis += rank;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? p.outer : d == axis ? p.axis : p.inner) *= shape[size_t(d)];
  return p;
}

/// Softmax/LogSoftmax {axis} and their gradients (dY, Y -> dX).
static KernelOr createSoftmax(CudaBackend &be, const OpSpec &spec) {
  bool grad = spec.opType.find("Grad") != std::string::npos;
  bool logForm = spec.opType.rfind("Log", 0) == 0;
  OASR_RETURN_IF_ERROR(checkSameShapeF32(bf16AsF32(spec), grad ? 2 : 1));
  int64_t axis = spec.attrs.getInt("axis", -1);
  int64_t rank = int64_t(spec.outputs[0].rank());
  if (axis < -rank || axis >= rank) {
    return nodeError(spec, "axis out of range");
  }
  RowParams p = softmaxRows(spec.outputs[0].shape, axis);
  if (grad)
    return lambda(
        be, spec,
        [p, logForm](cudaStream_t s, const auto &in, const auto &out) {
          launchSoftmaxGrad(p, floatAt(in, 0), floatAt(in, 1), floatAt(out, 0),
                            logForm, s);
        });
  return lambda(be, spec,
                [p, logForm](cudaStream_t s, const auto &in, const auto &out) {
                  launchSoftmax(p, floatAt(in, 0), floatAt(out, 0), logForm, s);
                });
}

/// Clip: X[, min[, max]] -> Y; bounds from the operands when given (read
/// back at each run), else from the f32 attributes min/max.
static KernelOr createClip(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 3, 1, 1, {0, 1, 2}, {0}));
  OASR_RETURN_IF_ERROR(checkSameShapes(spec, 1));
  double attrMin = spec.attrs.getFloat("min", -INFINITY),
         attrMax = spec.attrs.getFloat("max", INFINITY);
  int64_t n = spec.outputs[0].numel();
  HostOperands operands(be, spec);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    double lo = attrMin, hi = attrMax;
    operands.scalar(in, 1, lo);
    operands.scalar(in, 2, hi);
    launchUnary(UnaryOp::Clip, floatAt(in, 0), floatAt(out, 0), n, float(lo),
                float(hi), s);
  });
}

void registerPointwiseKernels(FactoryRegistry &r) {
  r["Relu"] = createRelu;
  r["ReluGrad"] = createRelu;
  for (const NamedOp<UnaryOp> &op : kUnaryOps)
    r[op.name] = createUnary;
  for (const NamedOp<GradOp> &op : kGradOps)
    r[op.name] = createGradOp;
  r["Clip"] = createClip;
  for (const NamedOp<CmpOp> &op : kCmpOps)
    r[op.name] = createCompare;
  r["Not"] = createNot;
  r["Where"] = createWhere;
  for (const char *op :
       {"Softmax", "LogSoftmax", "SoftmaxGrad", "LogSoftmaxGrad",
        "SoftmaxGrad_13", "LogSoftmaxGrad_13"})
    r[op] = createSoftmax;
}

} // namespace oasr::rt::cuda
