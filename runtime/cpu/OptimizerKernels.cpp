//===- OptimizerKernels.cpp - Optimizer updates on the CPU ----------------===//
//
// KernelBackend::update for host memory: sgd, momentum (dampening,
// Nesterov), adagrad and adam, the ONNX preview-training rules
// (docs/runtime.md "Optimizers") as KernelMath.h writes them, in the float
// arithmetic the CUDA backend's update kernel uses. One pass over the
// parameter, in order, in chunks; a 16-bit copy of the parameter (mixed
// precision) is rounded from each chunk while it is in cache.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include "oasr/Runtime/LowFloat.h"

#include <algorithm>
#include <cmath>

namespace oasr::rt::cpu {

namespace {

/// One rule over `n` elements: the parameter p, its gradient g, up to two
/// state tensors v and h, and their new values (which may alias them).
struct UpdateSpan {
  const float *p, *g, *v, *h;
  float *np, *nv, *nh;
};

} // namespace

/// One update over `n` elements, on KernelMath.h's rules.
static void applyRule(const UpdateScalars &u, const UpdateSpan &s, int64_t n) {
  const float *p = s.p, *g = s.g, *v = s.v, *h = s.h;
  float *np = s.np, *nv = s.nv, *nh = s.nh;
  switch (u.algo) {
  case UpdateAlgo::Sgd:
    for (int64_t i = 0; i < n; ++i)
      np[i] = sgdStep(u, p[i], g[i]);
    return;
  case UpdateAlgo::Momentum:
    for (int64_t i = 0; i < n; ++i)
      momentumStep(u, p[i], g[i], v[i], np[i], nv[i]);
    return;
  case UpdateAlgo::Adagrad:
    for (int64_t i = 0; i < n; ++i)
      adagradStep(u, p[i], g[i], v[i], np[i], nv[i]);
    return;
  case UpdateAlgo::Adam:
    for (int64_t i = 0; i < n; ++i)
      adamStep(u, p[i], g[i], v[i], h[i], np[i], nv[i], nh[i]);
    return;
  case UpdateAlgo::AdamW:
    for (int64_t i = 0; i < n; ++i)
      adamwStep(u, p[i], g[i], v[i], h[i], np[i], nv[i], nh[i]);
    return;
  }
}

/// One optimizer step on the host, oasr.optimizer_update's rules (the
/// ONNX preview-training optimizers); `t` is the number of earlier updates.
/// Arithmetic in float, as the reference implementations do. A 16-bit
/// last result is the parameter's copy (KernelBackend::updatesWeightCopies).
void update(const UpdateRule &u, int64_t t, const std::vector<TensorRef> &in,
            const std::vector<TensorRef> &out) {
  const int64_t n = in[0].numel();
  const TensorRef *copy = out.size() > 1 && isLowFloat(out.back().desc.dtype)
                              ? &out.back()
                              : nullptr;
  auto at = [](const TensorRef *r, int64_t b) {
    return r && r->data ? r->as<float>() + b : nullptr;
  };
  auto input = [&](size_t k) { return k < in.size() ? &in[k] : nullptr; };
  auto result = [&](size_t k) {
    return k < out.size() - (copy ? 1 : 0) ? &out[k] : nullptr;
  };
  const UpdateScalars scalars = updateScalars(u, t);
  // Chunks small enough that the copy rounds them from the cache.
  constexpr int64_t kChunk = 4096;
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t len = std::min(kChunk, n - b);
    UpdateSpan s{at(input(0), b), at(input(1), b),  at(input(2), b),
                 at(input(3), b), at(result(0), b), at(result(1), b),
                 at(result(2), b)};
    applyRule(scalars, s, len);
    if (copy)
      narrowFromF32(copy->desc.dtype, s.np,
                    static_cast<uint16_t *>(copy->data) + b, size_t(len));
  }
}

} // namespace oasr::rt::cpu
