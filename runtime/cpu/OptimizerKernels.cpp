//===- OptimizerKernels.cpp - Optimizer updates on the CPU ----------------===//
//
// KernelBackend::update for host memory: sgd, momentum (dampening,
// Nesterov), adagrad and adam, the ONNX preview-training rules
// (docs/runtime.md "Optimizers"), in the float arithmetic the CUDA
// backend's update kernel uses. One pass over the parameter, in order, in
// chunks; a 16-bit copy of the parameter (mixed precision) is rounded from
// each chunk while it is in cache.
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

static void applyRule(const UpdateRule &u, int64_t t, const UpdateSpan &s,
                      int64_t n) {
  const float *p = s.p, *g = s.g, *v = s.v, *h = s.h;
  float *np = s.np, *nv = s.nv, *nh = s.nh;
  const float lr = float(u.lr), wd = float(u.weightDecay);
  if (u.algo == "sgd") {
    if (wd == 0.0f)
      for (int64_t i = 0; i < n; ++i)
        np[i] = p[i] - lr * g[i];
    else
      for (int64_t i = 0; i < n; ++i)
        np[i] = p[i] - lr * (g[i] + wd * p[i]);
    return;
  }
  if (u.algo == "momentum") {
    // v' = m v + c g_r, c = 1 - dampening after the first update;
    // p' = p - lr v' or, Nesterov, p - lr (g_r + m v').
    const float m = float(u.momentum);
    const float c = t > 0 ? float(1.0 - u.dampening) : 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      float gr = g[i] + wd * p[i];
      float vi = m * v[i] + c * gr;
      nv[i] = vi;
      np[i] = p[i] - lr * (u.nesterov ? gr + m * vi : vi);
    }
    return;
  }
  const float eps = float(u.epsilon);
  if (u.algo == "adagrad") {
    // h' = h + g_r^2; p' = p - lr / (1 + t lr_decay) g_r / (sqrt(h') + eps)
    const float r = float(u.lr / (1.0 + double(t) * u.lrDecay));
    for (int64_t i = 0; i < n; ++i) {
      float gr = g[i] + wd * p[i];
      float hi = v[i] + gr * gr;
      nv[i] = hi;
      np[i] = p[i] - r * gr / (std::sqrt(hi) + eps);
    }
    return;
  }
  // adam: v' = b1 v + (1 - b1) g_r; h' = b2 h + (1 - b2) g_r^2;
  // r = lr sqrt(1 - b2^t) / (1 - b1^t) after the first update;
  // p' = (1 - wd_post) (p - r v' / (sqrt(h') + eps)).
  const float b1 = float(u.beta1), b2 = float(u.beta2);
  const float r =
      t > 0 ? float(u.lr * std::sqrt(1.0 - std::pow(u.beta2, double(t))) /
                    (1.0 - std::pow(u.beta1, double(t))))
            : lr;
  const float keep = float(1.0 - u.weightDecayPost);
  for (int64_t i = 0; i < n; ++i) {
    float gr = g[i] + wd * p[i];
    float vi = b1 * v[i] + (1.0f - b1) * gr;
    float hi = b2 * h[i] + (1.0f - b2) * gr * gr;
    nv[i] = vi;
    nh[i] = hi;
    np[i] = keep * (p[i] - r * vi / (std::sqrt(hi) + eps));
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
  // Chunks small enough that the copy rounds them from the cache.
  constexpr int64_t kChunk = 4096;
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t len = std::min(kChunk, n - b);
    UpdateSpan s{at(input(0), b), at(input(1), b),  at(input(2), b),
                 at(input(3), b), at(result(0), b), at(result(1), b),
                 at(result(2), b)};
    applyRule(u, t, s, len);
    if (copy)
      narrowFromF32(copy->desc.dtype, s.np,
                    static_cast<uint16_t *>(copy->data) + b, size_t(len));
  }
}

} // namespace oasr::rt::cpu
