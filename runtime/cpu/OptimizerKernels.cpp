//===- OptimizerKernels.cpp - Optimizer updates on the CPU ----------------===//
//
// KernelBackend::update for host memory: sgd, momentum (dampening,
// Nesterov), adagrad and adam, the ONNX preview-training rules
// (docs/runtime.md "Optimizers"), in the float arithmetic the CUDA
// backend's update kernel uses. One pass over the parameter, in order.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <cmath>

namespace oasr::rt::cpu {

/// One optimizer step on the host, oasr.optimizer_update's rules (the
/// ONNX preview-training optimizers); `t` is the number of earlier updates.
/// Arithmetic in float, as the reference implementations do.
void update(const UpdateRule &u, int64_t t, const std::vector<TensorRef> &in,
            const std::vector<TensorRef> &out) {
  float *p = in[0].as<float>();
  const float *g = in[1].as<float>();
  float *np = out[0].as<float>();
  const int64_t n = in[0].numel();
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
  const float *v = in[2].as<float>();
  float *nv = out[1].as<float>();
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
  const float *h = in[3].as<float>();
  float *nh = out[2].as<float>();
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

} // namespace oasr::rt::cpu
