//===- NormKernels.cpp - Layer normalization and its gradient -------------===//
//
// LayerNormalization(Grad) on the CPU, for f32 and for bf16 data (X, Y, dY,
// dX) with f32 scale, bias and statistics (docs/precision.md, "normalize").
// Sums run in blocks, in vector lanes (VectorSums.h).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include "VectorSums.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace oasr::rt::cpu {

namespace {

/// X viewed as [rows, cols]: normalized over the dims from `axis` on.
struct LnGeom {
  int64_t rows = 1, cols = 1;
  float eps = 1e-5f;
};

/// The operands of one LayerNormalization(Grad), typed by the kernel.
struct LnArgs {
  LnGeom g;
  const void *x = nullptr, *dy = nullptr;
  void *y = nullptr; ///< Y, or dX for the gradient
  const float *scale = nullptr, *bias = nullptr;
  float *mean = nullptr, *inv = nullptr;
};

template <typename T>
[[gnu::always_inline]] inline void forwardRows(const LnArgs &a, int64_t r0,
                                               int64_t r1) {
  const int64_t n = a.g.cols;
  const float *sc = a.scale, *b = a.bias;
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = static_cast<const T *>(a.x) + r * n;
    T *yr = static_cast<T *>(a.y) + r * n;
    const float mean =
        float(blockSum(n, [&](int64_t c) { return loadF(xr, c); }) / double(n));
    const double ss = blockSum(n, [&](int64_t c) {
      float d = loadF(xr, c) - mean;
      return d * d;
    });
    const float inv = float(1.0 / std::sqrt(ss / double(n) + a.g.eps));
    if (b) {
#pragma omp simd
      for (int64_t c = 0; c < n; ++c)
        storeF(yr, c, (loadF(xr, c) - mean) * inv * sc[c] + b[c]);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < n; ++c)
        storeF(yr, c, (loadF(xr, c) - mean) * inv * sc[c]);
    }
    if (a.mean)
      a.mean[r] = mean;
    if (a.inv)
      a.inv[r] = inv;
  }
}

/// dX of rows [r0, r1): dX = inv (dY sc - mean(dY sc) - x̂ mean(dY sc x̂)).
template <typename T>
[[gnu::always_inline]] inline void gradRows(const LnArgs &a, int64_t r0,
                                            int64_t r1) {
  const int64_t n = a.g.cols;
  const float *sc = a.scale;
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = static_cast<const T *>(a.x) + r * n;
    const T *gr = static_cast<const T *>(a.dy) + r * n;
    T *dr = static_cast<T *>(a.y) + r * n;
    const float m = a.mean[r], iv = a.inv[r];
    const float mg =
        float(blockSum(n, [&](int64_t c) { return loadF(gr, c) * sc[c]; }) /
              double(n));
    const float mgx = float(blockSum(n,
                                     [&](int64_t c) {
                                       return loadF(gr, c) * sc[c] *
                                              ((loadF(xr, c) - m) * iv);
                                     }) /
                            double(n));
#pragma omp simd
    for (int64_t c = 0; c < n; ++c)
      storeF(dr, c,
             iv * (loadF(gr, c) * sc[c] - mg - (loadF(xr, c) - m) * iv * mgx));
  }
}

/// dScale and dB over columns [c0, c1), c1 - c0 <= kSumBlock.
template <typename T>
[[gnu::always_inline]] inline void paramGradColumns(const LnArgs &a,
                                                    float *dScale, float *dB,
                                                    int64_t c0, int64_t c1) {
  const int64_t n = a.g.cols, w = c1 - c0;
  const T *x = static_cast<const T *>(a.x) + c0;
  const T *dy = static_cast<const T *>(a.dy) + c0;
  double totS[kSumBlock] = {0}, totB[kSumBlock] = {0};
  columnSums(a.g.rows, w, totS, [&](int64_t r) {
    const T *xr = x + r * n, *gr = dy + r * n;
    const float m = a.mean[r], iv = a.inv[r];
    return [=](int64_t c) { return loadF(gr, c) * ((loadF(xr, c) - m) * iv); };
  });
  columnSums(a.g.rows, w, totB, [&](int64_t r) {
    const T *gr = dy + r * n;
    return [=](int64_t c) { return loadF(gr, c); };
  });
  for (int64_t c = 0; c < w; ++c) {
    if (dScale)
      dScale[c0 + c] = float(totS[c]);
    if (dB)
      dB[c0 + c] = float(totB[c]);
  }
}

// The entry points the clones are made of, one per element type.
OASR_VECTOR_CLONES void forwardF32(const LnArgs &a, int64_t r0, int64_t r1) {
  forwardRows<float>(a, r0, r1);
}
OASR_VECTOR_CLONES void forwardBF16(const LnArgs &a, int64_t r0, int64_t r1) {
  forwardRows<uint16_t>(a, r0, r1);
}
OASR_VECTOR_CLONES void gradF32(const LnArgs &a, int64_t r0, int64_t r1) {
  gradRows<float>(a, r0, r1);
}
OASR_VECTOR_CLONES void gradBF16(const LnArgs &a, int64_t r0, int64_t r1) {
  gradRows<uint16_t>(a, r0, r1);
}
OASR_VECTOR_CLONES void paramGradF32(const LnArgs &a, float *ds, float *db,
                                     int64_t c0, int64_t c1) {
  paramGradColumns<float>(a, ds, db, c0, c1);
}
OASR_VECTOR_CLONES void paramGradBF16(const LnArgs &a, float *ds, float *db,
                                      int64_t c0, int64_t c1) {
  paramGradColumns<uint16_t>(a, ds, db, c0, c1);
}

using RowFn = void (*)(const LnArgs &, int64_t, int64_t);

/// Runs `fn` over every row, in chunks the threads share.
void overRows(RowFn fn, const LnArgs &a) {
  constexpr int64_t kChunk = 8;
  const int64_t chunks = (a.g.rows + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k)
    fn(a, k * kChunk, std::min(a.g.rows, (k + 1) * kChunk));
}

bool lnGeom(const OpSpec &spec, const TensorDesc &x, const TensorDesc &scale,
            LnGeom &g, std::string &error) {
  int64_t axis;
  if (!normAxis(spec, int64_t(x.rank()), -1, axis, error))
    return false;
  for (int64_t k = 0; k < axis; ++k)
    g.rows *= x.shape[k];
  for (size_t k = axis; k < x.rank(); ++k)
    g.cols *= x.shape[k];
  g.eps = float(spec.attrs.getFloat("epsilon", 1e-5));
  if (scale.numel() != g.cols) {
    error =
        nodeError(spec, "Scale has " + std::to_string(scale.numel()) +
                            " elements, expected " + std::to_string(g.cols));
    return false;
  }
  return true;
}

/// The data operands (`data`: X, Y, dY, dX) are all f32 or all bf16, and
/// every other operand and result is f32. A mix of other types is refused
/// (with bf16/f16 it then runs widened).
bool checkNormTypes(const OpSpec &spec, const std::vector<size_t> &dataIn,
                    const std::vector<size_t> &dataOut, bool &bf16,
                    std::string &error) {
  bf16 = spec.inputs[dataIn[0]].dtype == DType::BF16;
  const DType data = bf16 ? DType::BF16 : DType::F32;
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (!checkDType(spec, true, i,
                    std::find(dataIn.begin(), dataIn.end(), i) != dataIn.end()
                        ? data
                        : DType::F32,
                    error))
      return false;
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    if (!checkDType(spec, false, i,
                    std::find(dataOut.begin(), dataOut.end(), i) !=
                            dataOut.end()
                        ? data
                        : DType::F32,
                    error))
      return false;
  return true;
}

/// LayerNormalization: X, Scale[, B] -> Y[, Mean[, InvStdDev]].
class LayerNormKernel final : public CpuKernel {
public:
  LayerNormKernel(const OpSpec &spec, const LnGeom &g, bool bf16)
      : CpuKernel(spec), g(g), bf16(bf16) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    LnArgs a;
    a.g = g;
    a.x = in[0].data;
    a.scale = in[1].as<float>();
    a.bias = in.size() > 2 && in[2].data ? in[2].as<float>() : nullptr;
    a.y = out[0].data;
    a.mean = out.size() > 1 ? out[1].as<float>() : nullptr;
    a.inv = out.size() > 2 ? out[2].as<float>() : nullptr;
    overRows(bf16 ? forwardBF16 : forwardF32, a);
  }

private:
  LnGeom g;
  bool bf16;
};

/// LayerNormalizationGrad: dY, X, Scale, Mean, InvStdDev -> dX, dScale[, dB].
class LayerNormGradKernel final : public CpuKernel {
public:
  LayerNormGradKernel(const OpSpec &spec, const LnGeom &g, bool bf16)
      : CpuKernel(spec), g(g), bf16(bf16) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    LnArgs a;
    a.g = g;
    a.dy = in[0].data;
    a.x = in[1].data;
    a.scale = in[2].as<float>();
    a.mean = in[3].as<float>();
    a.inv = in[4].as<float>();
    a.y = out[0].data;
    overRows(bf16 ? gradBF16 : gradF32, a);
    float *ds = out.size() > 1 ? out[1].as<float>() : nullptr;
    float *db = out.size() > 2 ? out[2].as<float>() : nullptr;
    if (!ds && !db)
      return;
    // Blocks of half kSumBlock, so that 2 threads share a 768-wide row.
    constexpr int64_t kCols = kSumBlock / 2;
    const int64_t blocks = (g.cols + kCols - 1) / kCols;
    const auto fn = bf16 ? paramGradBF16 : paramGradF32;
#pragma omp parallel for schedule(static)
    for (int64_t bk = 0; bk < blocks; ++bk)
      fn(a, ds, db, bk * kCols, std::min(g.cols, (bk + 1) * kCols));
  }

private:
  LnGeom g;
  bool bf16;
};

std::unique_ptr<Kernel> createLayerNorm(const OpSpec &spec,
                                        std::string &error) {
  bool bf16;
  if (!checkArity(spec, 2, 3, 1, 3, error) ||
      !checkNormTypes(spec, {0}, {0}, bf16, error))
    return nullptr;
  LnGeom g;
  if (!lnGeom(spec, spec.inputs[0], spec.inputs[1], g, error))
    return nullptr;
  if ((spec.inputs.size() > 2 && spec.inputs[2].numel() != g.cols) ||
      spec.outputs[0].shape != spec.inputs[0].shape ||
      (spec.outputs.size() > 1 && spec.outputs[1].numel() != g.rows) ||
      (spec.outputs.size() > 2 && spec.outputs[2].numel() != g.rows)) {
    error = nodeError(spec, "B, Y, Mean or InvStdDev has the wrong size");
    return nullptr;
  }
  return std::make_unique<LayerNormKernel>(spec, g, bf16);
}

std::unique_ptr<Kernel> createLayerNormGrad(const OpSpec &spec,
                                            std::string &error) {
  bool bf16;
  if (!checkArity(spec, 5, 5, 1, 3, error) ||
      !checkNormTypes(spec, {0, 1}, {0}, bf16, error))
    return nullptr;
  LnGeom g;
  if (!lnGeom(spec, spec.inputs[1], spec.inputs[2], g, error))
    return nullptr;
  if (spec.inputs[0].shape != spec.inputs[1].shape ||
      spec.outputs[0].shape != spec.inputs[1].shape ||
      spec.inputs[3].numel() != g.rows || spec.inputs[4].numel() != g.rows) {
    error = nodeError(spec, "dY, X, dX, Mean or InvStdDev has the wrong size");
    return nullptr;
  }
  return std::make_unique<LayerNormGradKernel>(spec, g, bf16);
}

} // namespace

void registerNormKernels(KernelRegistry &r) {
  r["LayerNormalization"] = createLayerNorm;
  r["LayerNormalizationGrad"] = createLayerNormGrad;
}

} // namespace oasr::rt::cpu
