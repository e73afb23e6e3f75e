//===- GradWire.h - The element type gradients travel in --------*- C++ -*-===//
//
// Gradients are f32 in memory. A plan compiled with `grad-dtype=bf16|f16`
// (`wire_type` on each oasr.allreduce_start) sends them in a 16-bit type:
// the fused buffer is rounded to it (to nearest, ties to even) before the
// allreduce, the ranks sum it in that type (each partial sum computed in f32
// and rounded back), and the sum is converted back to f32 and divided by the
// number of ranks after it. These are the host conversions; the CUDA
// backend has the same ones on the device (runtime/cuda/GradWire.cu).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_GRADWIRE_H
#define OASR_RUNTIME_GRADWIRE_H

#include "oasr/Runtime/LowFloat.h"

#include <cstddef>
#include <cstdint>

namespace oasr::rt {

/// The element type of a gradient allreduce on the wire.
enum class GradWire : uint8_t { F32, BF16, F16 };

/// "f32", "bf16", "f16".
inline const char *gradWireName(GradWire wire) {
  switch (wire) {
  case GradWire::F32:
    return "f32";
  case GradWire::BF16:
    return "bf16";
  case GradWire::F16:
    return "f16";
  }
  return "f32";
}

/// dst[i] = round(src[i]) in `wire` (BF16 or F16).
void toWire(GradWire wire, const float *src, uint16_t *dst, size_t n);
/// dst[i] = float(src[i]) * scale.
void fromWire(GradWire wire, const uint16_t *src, float *dst, size_t n,
              float scale);
/// inout[i] = round(float(in[i]) + float(inout[i])): one step of the sum over
/// ranks (commutative bit for bit, so every rank gets the same sum).
void wireSum(GradWire wire, const uint16_t *in, uint16_t *inout, size_t n);

} // namespace oasr::rt

#endif // OASR_RUNTIME_GRADWIRE_H
