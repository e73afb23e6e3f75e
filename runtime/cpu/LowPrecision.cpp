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
      // Byte moves of any element type.
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Concat",
      "Split", "Expand", "Slice", "SliceGrad", "Sum",
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
  return createLowPrecisionKernel(
      spec, takesLowFloat(spec.opType) && (bf16Only || spec.opType == "Cast"),
      factory,
      [&](std::unique_ptr<Kernel> inner) -> std::unique_ptr<Kernel> {
        return std::make_unique<WidenedKernel>(spec, std::move(inner));
      },
      error);
}

} // namespace oasr::rt::cpu

//===----------------------------------------------------------------------===//
// BatchNormalization on bf16 data
//===----------------------------------------------------------------------===//
//
// oneDNN 2.6 runs bf16 batch normalization on plain NCHW with a reference
// implementation (slower than widening to its f32 JIT kernel), so bf16 data
// gets these loops: statistics, scale and bias in f32, every plane summed
// in f32 lanes and the planes added in double (no long running f32 sum),
// one pass for the statistics and one for the result, reading bf16.

namespace oasr::rt::cpu {
namespace {

/// The sums over one plane of `n` bf16 elements: of x - shift and of its
/// square (shifted by an estimate of the mean, for accuracy).
static void planeSums(const uint16_t *x, int64_t n, float shift, double &s1,
                      double &s2) {
  float a1 = 0, a2 = 0;
#pragma omp simd reduction(+ : a1, a2)
  for (int64_t i = 0; i < n; ++i) {
    float d = bf16ToFloat(x[i]) - shift;
    a1 += d;
    a2 += d * d;
  }
  s1 += a1;
  s2 += a2;
}

class BatchNormBF16Kernel final : public CpuKernel {
public:
  BatchNormBF16Kernel(const OpSpec &spec, bool training)
      : CpuKernel(spec), training(training) {
    const auto &xs = spec.inputs[0].shape;
    n = xs[0];
    c = xs[1];
    plane = 1;
    for (size_t i = 2; i < xs.size(); ++i)
      plane *= xs[i];
    eps = float(spec.attrs.getFloat("epsilon", 1e-5));
    momentum = float(spec.attrs.getFloat("momentum", 0.9));
    numOutputs = spec.outputs.size();
  }

protected:
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const uint16_t *x = in[0].as<uint16_t>();
    uint16_t *y = out[0].as<uint16_t>();
    const float *scale = in[1].as<float>(), *bias = in[2].as<float>();
    const float *rm = in[3].as<float>(), *rv = in[4].as<float>();
    float *rmOut = training && numOutputs >= 2 ? out[1].as<float>() : nullptr;
    float *rvOut = training && numOutputs >= 3 ? out[2].as<float>() : nullptr;
    float *savedMean =
        training && numOutputs >= 4 ? out[3].as<float>() : nullptr;
    float *invStdOut =
        training && numOutputs >= 5 ? out[4].as<float>() : nullptr;
    const int64_t count = n * plane;
    const float unbias = count > 1 ? float(count) / float(count - 1) : 1.0f;
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      float mean = rm[ch], var = rv[ch];
      if (training) {
        float shift = bf16ToFloat(x[ch * plane]);
        double s1 = 0, s2 = 0;
        for (int64_t b = 0; b < n; ++b)
          planeSums(x + (b * c + ch) * plane, plane, shift, s1, s2);
        double m = s1 / double(count);
        mean = float(shift + m);
        var = float(std::max(0.0, s2 / double(count) - m * m));
        if (rmOut)
          rmOut[ch] = momentum * rm[ch] + (1 - momentum) * mean;
        if (rvOut)
          rvOut[ch] = momentum * rv[ch] + (1 - momentum) * var * unbias;
        if (savedMean)
          savedMean[ch] = mean;
      }
      float invStd = 1.0f / std::sqrt(var + eps);
      if (invStdOut)
        invStdOut[ch] = invStd;
      float a = scale[ch] * invStd, b0 = bias[ch] - mean * a;
      for (int64_t b = 0; b < n; ++b) {
        const uint16_t *xp = x + (b * c + ch) * plane;
        uint16_t *yp = y + (b * c + ch) * plane;
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i)
          yp[i] = floatToBF16(bf16ToFloat(xp[i]) * a + b0);
      }
    }
  }

private:
  bool training;
  int64_t n, c, plane;
  float eps, momentum;
  size_t numOutputs;
};

/// dY, X (bf16), scale, saved_mean, saved_inv_std -> dX (bf16), dScale,
/// dBias.
class BatchNormGradBF16Kernel final : public CpuKernel {
public:
  explicit BatchNormGradBF16Kernel(const OpSpec &spec) : CpuKernel(spec) {
    const auto &xs = spec.inputs[1].shape;
    n = xs[0];
    c = xs[1];
    plane = 1;
    for (size_t i = 2; i < xs.size(); ++i)
      plane *= xs[i];
    numOutputs = spec.outputs.size();
  }

protected:
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    const uint16_t *dy = in[0].as<uint16_t>(), *x = in[1].as<uint16_t>();
    const float *scale = in[2].as<float>(), *mean = in[3].as<float>(),
                *invStd = in[4].as<float>();
    uint16_t *dx = out[0].as<uint16_t>();
    float *dScale = numOutputs >= 2 ? out[1].as<float>() : nullptr;
    float *dBias = numOutputs >= 3 ? out[2].as<float>() : nullptr;
    const double count = double(n * plane);
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float m = mean[ch], is = invStd[ch];
      double sdy = 0, sdyx = 0;
      for (int64_t b = 0; b < n; ++b) {
        const uint16_t *dp = dy + (b * c + ch) * plane,
                       *xp = x + (b * c + ch) * plane;
        float a1 = 0, a2 = 0;
#pragma omp simd reduction(+ : a1, a2)
        for (int64_t i = 0; i < plane; ++i) {
          float g = bf16ToFloat(dp[i]);
          a1 += g;
          a2 += g * (bf16ToFloat(xp[i]) - m);
        }
        sdy += a1;
        sdyx += a2;
      }
      // dScale = sum(dy * xhat), dBias = sum(dy).
      float ds = float(sdyx * is), db = float(sdy);
      if (dScale)
        dScale[ch] = ds;
      if (dBias)
        dBias[ch] = db;
      // dx = scale * invStd * (dy - dBias/M - xhat * dScale/M).
      const float k = scale[ch] * is, meanDy = float(sdy / count),
                  kx = float(ds / count) * is;
      for (int64_t b = 0; b < n; ++b) {
        const uint16_t *dp = dy + (b * c + ch) * plane,
                       *xp = x + (b * c + ch) * plane;
        uint16_t *op = dx + (b * c + ch) * plane;
#pragma omp simd
        for (int64_t i = 0; i < plane; ++i)
          op[i] = floatToBF16(k * (bf16ToFloat(dp[i]) - meanDy -
                                   (bf16ToFloat(xp[i]) - m) * kx));
      }
    }
  }

private:
  int64_t n, c, plane;
  size_t numOutputs;
};

} // namespace

std::unique_ptr<Kernel> createBatchNormBF16(const OpSpec &spec, bool training) {
  return std::make_unique<BatchNormBF16Kernel>(spec, training);
}

std::unique_ptr<Kernel> createBatchNormGradBF16(const OpSpec &spec) {
  return std::make_unique<BatchNormGradBF16Kernel>(spec);
}

} // namespace oasr::rt::cpu
