//===- LowPrecision.cpp - bf16/f16 tensors on the CPU backend -------------===//
//
// Under mixed precision (docs/precision.md) a node may read and write bf16
// or f16 tensors. The kernels that take them natively (oneDNN's bf16
// convolutions and products, the byte-moving views and copies, Cast) get
// the node as it is; every other kernel is built for the f32 version of the
// node and wrapped: the 16-bit operands are widened into f32 scratch, the
// f32 kernel runs, and its results are rounded back into the node's 16-bit
// buffers. The scratch lives in the kernel's workspace (the executor's
// activation arena), so a widened node costs two conversions and no
// persistent memory; the saved activations stay 16-bit.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "oasr/Runtime/LowFloat.h"

#include <omp.h>

#include <set>

namespace oasr::rt::cpu {
namespace {

/// Converts in parallel chunks (conversions are bandwidth-bound).
template <typename F> static void chunked(size_t n, F &&f) {
  constexpr size_t kChunk = 1 << 15;
  const int64_t chunks = int64_t((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    size_t b = size_t(c) * kChunk;
    f(b, std::min(kChunk, n - b));
  }
}

/// A node with 16-bit tensors run by the f32 kernel of the same node.
class WidenedKernel final : public CpuKernel {
public:
  WidenedKernel(const OpSpec &spec, std::unique_ptr<Kernel> inner)
      : CpuKernel(spec), inner(std::move(inner)) {
    auto declare = [&](const std::vector<TensorDesc> &descs,
                       std::vector<Buffer> &bufs) {
      for (const TensorDesc &d : descs) {
        Buffer b;
        b.type = d.dtype;
        b.numel = size_t(d.numel());
        if (isLowFloat(d.dtype) && b.numel) {
          b.mem = dnnl::memory(plainDesc({int64_t(b.numel)}), engine(),
                               DNNL_MEMORY_NONE);
          addScratch(b.mem);
        }
        bufs.push_back(b);
      }
    };
    declare(spec.inputs, ins);
    declare(spec.outputs, outs);
    if (size_t bytes = this->inner->workspaceBytes()) {
      innerSpace = dnnl::memory(
          dnnl::memory::desc({dnnl::memory::dim(bytes)},
                             dnnl::memory::data_type::u8,
                             dnnl::memory::format_tag::a),
          engine(), DNNL_MEMORY_NONE);
      addScratch(innerSpace);
    }
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
    if (innerSpace && !innerPlaced) {
      inner->setWorkspace(innerSpace.get_data_handle());
      innerPlaced = true;
    }
    std::vector<TensorRef> wideIn = in, wideOut = out;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!ins[i].mem || !in[i].data)
        continue;
      float *f = static_cast<float *>(ins[i].mem.get_data_handle());
      const char *src = static_cast<const char *>(in[i].data);
      DType t = ins[i].type;
      chunked(ins[i].numel, [&](size_t b, size_t n) {
        widenToF32(t, src + 2 * b, f + b, n);
      });
      wideIn[i].data = f;
      wideIn[i].desc.dtype = DType::F32;
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (!outs[i].mem || !out[i].data)
        continue;
      wideOut[i].data = outs[i].mem.get_data_handle();
      wideOut[i].desc.dtype = DType::F32;
    }
    inner->run(wideIn, wideOut);
    applyNumThreads();
    for (size_t i = 0; i < out.size(); ++i) {
      if (!outs[i].mem || !out[i].data)
        continue;
      const float *f = static_cast<const float *>(wideOut[i].data);
      char *dst = static_cast<char *>(out[i].data);
      DType t = outs[i].type;
      chunked(outs[i].numel, [&](size_t b, size_t n) {
        narrowFromF32(t, f + b, dst + 2 * b, n);
      });
    }
  }

private:
  struct Buffer {
    DType type = DType::F32;
    size_t numel = 0;
    dnnl::memory mem; ///< f32 scratch; empty for tensors passed as they are
  };
  std::unique_ptr<Kernel> inner;
  std::vector<Buffer> ins, outs;
  dnnl::memory innerSpace;
  bool innerPlaced = false;
};

} // namespace

bool hasLowFloat(const OpSpec &spec) {
  for (const auto *descs : {&spec.inputs, &spec.outputs})
    for (const TensorDesc &d : *descs)
      if (isLowFloat(d.dtype))
        return true;
  return false;
}

/// Kernels that read and write bf16 tensors themselves (their factories
/// check the element types and refuse a mix they cannot run, which then
/// goes to the widening wrapper).
static bool takesLowFloat(const std::string &op) {
  static const std::set<std::string> ops = {
      // oneDNN bf16 primitives, f32 accumulation.
      "Conv", "ConvGrad", "MatMul", "Gemm", "GemmGrad", "Transpose",
      // Byte moves of any element type.
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Concat",
      "Split", "Expand", "Slice",
      // Converts between any two types.
      "Cast"};
  return ops.count(op) != 0;
}

std::unique_ptr<Kernel> createLowPrecision(const OpSpec &spec,
                                           const KernelFactory &factory,
                                           std::string &error) {
  bool bf16Only = true;
  for (const auto *descs : {&spec.inputs, &spec.outputs})
    for (const TensorDesc &d : *descs)
      bf16Only = bf16Only && d.dtype != DType::F16;
  std::string nativeError;
  if (takesLowFloat(spec.opType) && (bf16Only || spec.opType == "Cast")) {
    if (std::unique_ptr<Kernel> k = factory(spec, nativeError))
      return k;
  }
  OpSpec wide = spec;
  for (auto *descs : {&wide.inputs, &wide.outputs})
    for (TensorDesc &d : *descs)
      if (isLowFloat(d.dtype))
        d.dtype = DType::F32;
  std::unique_ptr<Kernel> inner = factory(wide, error);
  if (!inner) {
    if (!nativeError.empty())
      error = nativeError;
    return nullptr;
  }
  error.clear();
  return std::make_unique<WidenedKernel>(spec, std::move(inner));
}

} // namespace oasr::rt::cpu
