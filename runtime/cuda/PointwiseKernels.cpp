//===- PointwiseKernels.cpp - Activations and comparisons -----------------===//
//
// Relu, the unary activations and their gradients, comparisons and logic:
// the CPU backend's PointwiseKernels.cpp family; device code in
// CudaPointwise.cu.
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

std::unique_ptr<Kernel> createRelu(CudaBackend &be, const OpSpec &spec,
                                   std::string &error) {
  bool grad = spec.opType == "ReluGrad";
  DType t = sameLowFloat(spec, DType::BF16) ? DType::BF16 : DType::F32;
  if (!checkArity(spec, grad ? 2 : 1, grad ? 2 : 1, 1, 1, error) ||
      (t == DType::F32 && !checkAllF32(spec, {0, 1}, {0}, error)))
    return nullptr;
  int64_t n = spec.outputs[0].numel();
  for (const TensorDesc &d : spec.inputs)
    if (d.numel() != n) {
      error = nodeError(spec, "operands and result must have the same size");
      return nullptr;
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

namespace {

/// Gelu's 'approximate' ("none" or "tanh"), for the op and its gradient;
/// false with `error` set for anything else.
static bool geluIsTanh(const OpSpec &spec, bool &tanh, std::string &error) {
  std::string approx = spec.attrs.getString("approximate", "none");
  if (approx != "none" && approx != "tanh") {
    error = nodeError(spec, "approximate '" + approx + "' is not supported");
    return false;
  }
  tanh = approx == "tanh";
  return true;
}

/// The activations' two parameters as the kernels take them: 'alpha'
/// (LeakyRelu's slope, 0.01 by default; HardSigmoid's, 0.2; Elu's, 1) and
/// 'beta' (HardSigmoid's offset, 0.5); the other ops ignore them.
static std::pair<float, float>
activationParams(const OpSpec &spec, bool leakyRelu, bool hardSigmoid) {
  float dfltA = leakyRelu ? 0.01f : hardSigmoid ? 0.2f : 1.0f;
  return {float(spec.attrs.getFloat("alpha", dfltA)),
          float(spec.attrs.getFloat("beta", 0.5))};
}

} // namespace

std::unique_ptr<Kernel> createUnary(CudaBackend &be, const OpSpec &spec,
                                    std::string &error) {
  static const std::map<std::string, UnaryOp> ops = {
      {"Abs", UnaryOp::Abs},
      {"Sigmoid", UnaryOp::Sigmoid},
      {"Tanh", UnaryOp::Tanh},
      {"Exp", UnaryOp::Exp},
      {"Log", UnaryOp::Log},
      {"Sqrt", UnaryOp::Sqrt},
      {"Erf", UnaryOp::Erf},
      {"Elu", UnaryOp::Elu},
      {"LeakyRelu", UnaryOp::LeakyRelu},
      {"HardSigmoid", UnaryOp::HardSigmoid},
      {"HardSwish", UnaryOp::HardSwish},
      {"Mish", UnaryOp::Mish},
      {"Reciprocal", UnaryOp::Reciprocal},
      {"Gelu", UnaryOp::GeluErf}};
  UnaryOp op = ops.at(spec.opType);
  bool tanh = false;
  if (op == UnaryOp::GeluErf && !geluIsTanh(spec, tanh, error))
    return nullptr;
  if (tanh)
    op = UnaryOp::GeluTanh;
  if (!checkSameShapeF32(bf16AsF32(spec), 1, error))
    return nullptr;
  std::pair<float, float> ab = activationParams(spec, op == UnaryOp::LeakyRelu,
                                                op == UnaryOp::HardSigmoid);
  float a = ab.first, b = ab.second;
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [op, a, b, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchUnary(op, floatAt(in, 0), floatAt(out, 0), n, a, b, s);
                });
}

/// <Op>Grad(dY, z) -> dX; ClipGrad takes its bounds from min/max.
std::unique_ptr<Kernel> createGradOp(CudaBackend &be, const OpSpec &spec,
                                     std::string &error) {
  static const std::map<std::string, GradOp> ops = {
      {"SigmoidGrad", GradOp::Sigmoid},
      {"TanhGrad", GradOp::Tanh},
      {"EluGrad", GradOp::Elu},
      {"LeakyReluGrad", GradOp::LeakyRelu},
      {"HardSigmoidGrad", GradOp::HardSigmoid},
      {"HardSwishGrad", GradOp::HardSwish},
      {"MishGrad", GradOp::Mish},
      {"GeluGrad", GradOp::GeluErf},
      {"ClipGrad", GradOp::Clip}};
  GradOp op = ops.at(spec.opType);
  bool tanh = false;
  if (op == GradOp::GeluErf && !geluIsTanh(spec, tanh, error))
    return nullptr;
  if (tanh)
    op = GradOp::GeluTanh;
  if (!checkSameShapeF32(bf16AsF32(spec), 2, error))
    return nullptr;
  std::pair<float, float> ab =
      op == GradOp::Clip
          ? std::pair{float(spec.attrs.getFloat("min", -INFINITY)),
                      float(spec.attrs.getFloat("max", INFINITY))}
          : activationParams(spec, op == GradOp::LeakyRelu,
                             op == GradOp::HardSigmoid);
  float a = ab.first, b = ab.second;
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [op, a, b, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchGrad(op, floatAt(in, 0), floatAt(in, 1),
                             floatAt(out, 0), n, a, b, s);
                });
}

std::unique_ptr<Kernel> createCompare(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  static const std::map<std::string, CmpOp> ops = {
      {"Equal", CmpOp::Equal},
      {"Less", CmpOp::Less},
      {"Greater", CmpOp::Greater},
      {"LessOrEqual", CmpOp::LessOrEqual},
      {"GreaterOrEqual", CmpOp::GreaterOrEqual},
      {"And", CmpOp::And},
      {"Or", CmpOp::Or},
      {"Xor", CmpOp::Xor}};
  CmpOp op = ops.at(spec.opType);
  Broadcast b;
  if (!checkArity(spec, 2, 2, 1, 1, error) ||
      !checkDType(spec, false, 0, DType::Bool, error) ||
      !checkDType(spec, true, 1, spec.inputs[0].dtype, error) ||
      !makeBroadcast(spec, spec.outputs[0].shape, b, error))
    return nullptr;
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

std::unique_ptr<Kernel> createNot(CudaBackend &be, const OpSpec &spec,
                                  std::string &error) {
  if (!checkArity(spec, 1, 1, 1, 1, error) ||
      !checkDType(spec, true, 0, DType::Bool, error) ||
      !checkDType(spec, false, 0, DType::Bool, error))
    return nullptr;
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec, [n](cudaStream_t s, const auto &in, const auto &out) {
    launchNot(in[0].template as<uint8_t>(), out[0].template as<uint8_t>(), n,
              s);
  });
}

} // namespace oasr::rt::cuda
