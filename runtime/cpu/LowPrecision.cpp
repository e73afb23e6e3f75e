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

#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>

namespace oasr::rt::cpu {

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

namespace {

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
      innerSpace = dnnl::memory(dnnl::memory::desc({dnnl::memory::dim(bytes)},
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

/// Kernels that read and write bf16 tensors themselves (their factories
/// check the element types and refuse a mix they cannot run, which then
/// goes to the widening wrapper).
static bool takesLowFloat(const std::string &op) {
  static const std::set<std::string> ops = {
      // oneDNN bf16 primitives, f32 accumulation and statistics.
      "Conv", "ConvGrad", "MatMul", "FusedMatMul", "Gemm", "GemmGrad",
      "Transpose", "BatchNormalization", "BatchNormalizationGrad",
      "LayerNormalization", "LayerNormalizationGrad", "Add", "Sub", "Mul",
      "Div", "Relu", "ReluGrad", "LeakyRelu", "LeakyReluGrad", "Sigmoid",
      "SigmoidGrad", "Tanh", "TanhGrad", "Elu", "EluGrad", "Abs", "Gelu",
      "GeluGrad",
      // Widened per batch index in the kernel's workspace.
      "FusedAttention", "FusedAttentionGrad",
      // Byte moves of any element type.
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Concat",
      "Split", "Expand", "Slice", "SliceGrad", "Sum",
      // Converts between any two types.
      "Cast"};
  return ops.count(op) != 0;
}

KernelOr createLowPrecision(const OpSpec &spec, const KernelFactory &factory) {
  bool bf16Only = true;
  for (const auto *descs : {&spec.inputs, &spec.outputs})
    for (const TensorDesc &d : *descs)
      bf16Only = bf16Only && d.dtype != DType::F16;
  return createLowPrecisionKernel(
      spec, takesLowFloat(spec.opType) && (bf16Only || spec.opType == "Cast"),
      factory, [&](std::unique_ptr<Kernel> inner) -> std::unique_ptr<Kernel> {
        return std::make_unique<WidenedKernel>(spec, std::move(inner));
      });
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

template <typename From, typename To>
static void castLoop(const void *src, void *dst, int64_t n) {
  const From *s = static_cast<const From *>(src);
  To *d = static_cast<To *>(dst);
#pragma omp parallel for schedule(static) if (n > 16384)
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, uint8_t>)
      d[i] = s[i] != From(0);
    else
      d[i] = To(s[i]);
  }
}

template <typename From>
static void castFrom(DType to, const void *src, void *dst, int64_t n) {
  switch (to) {
  case DType::F32:
    return castLoop<From, float>(src, dst, n);
  case DType::I64:
    return castLoop<From, int64_t>(src, dst, n);
  case DType::I32:
    return castLoop<From, int32_t>(src, dst, n);
  case DType::Bool:
    return castLoop<From, uint8_t>(src, dst, n);
  default:
    return;
  }
}

namespace {

/// Cast {to}: between f32, i64, i32 and bool (the result's type says which).
class CastKernel final : public CpuKernel {
public:
  explicit CastKernel(const OpSpec &spec)
      : CpuKernel(spec), from(spec.inputs[0].dtype), to(spec.outputs[0].dtype),
        n(spec.outputs[0].numel()) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    if (from == to)
      return parallelCopy(out[0].data, in[0].data, out[0].bytes());
    if (isLowFloat(from) || isLowFloat(to))
      return castLowFloat(in[0].data, out[0].data);
    switch (from) {
    case DType::F32:
      return castFrom<float>(to, in[0].data, out[0].data, n);
    case DType::I64:
      return castFrom<int64_t>(to, in[0].data, out[0].data, n);
    case DType::I32:
      return castFrom<int32_t>(to, in[0].data, out[0].data, n);
    case DType::Bool:
      return castFrom<uint8_t>(to, in[0].data, out[0].data, n);
    default:
      return;
    }
  }

private:
  /// Between f32, bf16 and f16 (bf16 <-> f16 through f32, exact on the way
  /// in), in chunks of a stack buffer.
  void castLowFloat(const void *src, void *dst) {
    constexpr int64_t kChunk = 4096;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 4)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t b = c * kChunk, len = std::min(kChunk, n - b);
      if (to == DType::F32) {
        widenToF32(from, static_cast<const uint16_t *>(src) + b,
                   static_cast<float *>(dst) + b, size_t(len));
        continue;
      }
      float tmp[kChunk];
      const float *f = static_cast<const float *>(src) + b;
      if (from != DType::F32) {
        widenToF32(from, static_cast<const uint16_t *>(src) + b, tmp,
                   size_t(len));
        f = tmp;
      }
      narrowFromF32(to, f, static_cast<uint16_t *>(dst) + b, size_t(len));
    }
  }

  DType from, to;
  int64_t n;
};

} // namespace

static KernelOr createCast(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  DType from = spec.inputs[0].dtype, to = spec.outputs[0].dtype;
  auto isFloat = [](DType t) { return t == DType::F32 || isLowFloat(t); };
  if ((isLowFloat(from) || isLowFloat(to)) && !(isFloat(from) && isFloat(to))) {
    // The backend widens the 16-bit side and casts from or to f32.
    return nodeError(spec, std::string("no direct cast from ") +
                               dtypeName(from) + " to " + dtypeName(to));
  }
  if (spec.inputs[0].shape != spec.outputs[0].shape) {
    return nodeError(spec, "operand and result must have one shape");
  }
  return std::make_unique<CastKernel>(spec);
}

void registerLowPrecisionKernels(KernelRegistry &r) { r["Cast"] = createCast; }

} // namespace oasr::rt::cpu
