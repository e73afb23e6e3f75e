//===- LowPrecision.cpp - Cast and bf16/f16 nodes on the CUDA backend -----===//
//
// Cast between element types, and nodes with 16-bit tensors: the kernels
// that read and write them themselves, and every other op run as its f32
// kernel between widening and narrowing casts in its scratch
// (WidenedKernel), as on the CPU (the CPU backend's LowPrecision.cpp).
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace oasr::rt::cuda {

// As on the CPU (runtime/cpu/LowPrecision.cpp): the kernels that take 16-bit
// tensors themselves get the node as it is (cuDNN convolutions and cuBLAS
// products on tensor cores with f32 accumulation, the byte-moving views,
// Cast); every other node runs its f32 kernel between widening and
// narrowing conversions in its scratch (the executor's arena), so the saved
// activations stay 16-bit and every op runs.

namespace {

/// A node with 16-bit tensors run by the f32 kernel of the same node.
class WidenedKernel final : public CudaKernel {
public:
  WidenedKernel(CudaBackend &be, const OpSpec &spec,
                std::unique_ptr<Kernel> inner)
      : CudaKernel(be, spec), inner(std::move(inner)) {
    op = "widened " + op; // its kernel times include the inner kernel's
    for (const TensorDesc &d : spec.inputs)
      ins.push_back(slot(d));
    for (const TensorDesc &d : spec.outputs)
      outs.push_back(slot(d));
    innerBytes = this->inner->workspaceBytes();
    if (innerBytes)
      innerAt = reserve(innerBytes);
  }
  bool randomPosition(uint64_t &position) const override {
    return inner->randomPosition(position);
  }
  void setRandomPosition(uint64_t position) override {
    inner->setRandomPosition(position);
  }

protected:
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    if (innerBytes && !innerPlaced) {
      inner->setWorkspace(scratchAt<char>(innerAt));
      innerPlaced = true;
    }
    std::vector<TensorRef> wideIn = in, wideOut = out;
    auto widen = [&](const Slot &sl, TensorRef &ref) {
      ref.data = scratchAt<float>(sl.at);
      ref.desc.dtype = DType::F32;
    };
    for (size_t i = 0; i < in.size(); ++i)
      if (ins[i].at != kNone && in[i].data) {
        widen(ins[i], wideIn[i]);
        launchCast(ins[i].type, DType::F32, in[i].data, wideIn[i].data,
                   ins[i].numel, stream);
      }
    for (size_t i = 0; i < out.size(); ++i)
      if (outs[i].at != kNone && out[i].data)
        widen(outs[i], wideOut[i]);
    inner->run(wideIn, wideOut);
    for (size_t i = 0; i < out.size(); ++i)
      if (outs[i].at != kNone && out[i].data)
        launchCast(DType::F32, outs[i].type, wideOut[i].data, out[i].data,
                   outs[i].numel, stream);
  }

private:
  static constexpr size_t kNone = ~size_t(0);
  struct Slot {
    DType type = DType::F32;
    int64_t numel = 0;
    size_t at = kNone; ///< f32 scratch; kNone for tensors passed as they are
  };
  Slot slot(const TensorDesc &d) {
    Slot sl{d.dtype, d.numel(), kNone};
    if (isLowFloat(d.dtype) && sl.numel)
      sl.at = reserve(size_t(sl.numel) * sizeof(float));
    return sl;
  }
  std::unique_ptr<Kernel> inner;
  std::vector<Slot> ins, outs;
  size_t innerBytes = 0, innerAt = 0;
  bool innerPlaced = false;
};

} // namespace

/// Kernels that read and write 16-bit tensors themselves (their factories
/// refuse a mix they cannot run, which then runs widened).
static bool takesLowFloat(const std::string &op) {
  static const std::set<std::string> ops = {
      // Tensor cores, f32 accumulation.
      "Conv", "ConvGrad", "MatMul", "FusedMatMul", "Gemm", "GemmGrad",
      // bf16 elements (any mix with f32), f32 arithmetic and statistics.
      "Add", "Sub", "Mul", "Div", "Sum", "Relu", "ReluGrad",
      "BatchNormalization", "BatchNormalizationGrad", "LayerNormalization",
      "LayerNormalizationGrad", "Softmax", "LogSoftmax", "SoftmaxGrad",
      "LogSoftmaxGrad", "SoftmaxGrad_13", "LogSoftmaxGrad_13", "ReduceSumTo",
      "Abs", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Elu", "LeakyRelu",
      "HardSigmoid", "HardSwish", "Mish", "Reciprocal", "Gelu", "SigmoidGrad",
      "TanhGrad", "EluGrad", "LeakyReluGrad", "HardSigmoidGrad",
      "HardSwishGrad", "MishGrad", "GeluGrad", "ClipGrad",
      // Tensor-core products, f32 scores and softmax.
      "FusedAttention", "FusedAttentionGrad",
      // Byte moves of any element type.
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose",
      "Gather", "Concat", "Split", "Where",
      // Distinct indices: stores of bf16 elements.
      "GatherGrad",
      // Converts between any two types.
      "Cast"};
  return ops.count(op) != 0;
}

KernelOr createLowPrecision(CudaBackend &be, const OpSpec &spec) {
  return createLowPrecisionKernel(
      spec, takesLowFloat(spec.opType),
      [&](const OpSpec &s) { return be.createNative(s); },
      [&](std::unique_ptr<Kernel> inner) -> std::unique_ptr<Kernel> {
        return std::make_unique<WidenedKernel>(be, spec, std::move(inner));
      });
}

static KernelOr createCast(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  DType from = spec.inputs[0].dtype, to = spec.outputs[0].dtype;
  if (spec.inputs[0].numel() != spec.outputs[0].numel()) {
    return nodeError(spec, "casts between tensors of one shape only");
  }
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [from, to, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchCast(from, to, in[0].data, out[0].data, n, s);
                });
}

void registerLowPrecisionKernels(FactoryRegistry &r) { r["Cast"] = createCast; }

} // namespace oasr::rt::cuda
