//===- GradWire.cpp - f32 <-> bf16/f16 for gradients on the wire ----------===//
//
// The wire's conversions and 16-bit sum, on the element conversions of
// LowFloat.cpp.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/GradWire.h"

namespace oasr::rt {

void toWire(GradWire wire, const float *src, uint16_t *dst, size_t n) {
  if (wire == GradWire::BF16)
    for (size_t i = 0; i < n; ++i)
      dst[i] = floatToBF16(src[i]);
  else
    for (size_t i = 0; i < n; ++i)
      dst[i] = floatToF16(src[i]);
}

void fromWire(GradWire wire, const uint16_t *src, float *dst, size_t n,
              float scale) {
  if (wire == GradWire::BF16)
    for (size_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(src[i]) * scale;
  else
    for (size_t i = 0; i < n; ++i)
      dst[i] = f16ToFloat(src[i]) * scale;
}

void wireSum(GradWire wire, const uint16_t *in, uint16_t *inout, size_t n) {
  if (wire == GradWire::BF16)
    for (size_t i = 0; i < n; ++i)
      inout[i] = floatToBF16(bf16ToFloat(in[i]) + bf16ToFloat(inout[i]));
  else
    for (size_t i = 0; i < n; ++i)
      inout[i] = floatToF16(f16ToFloat(in[i]) + f16ToFloat(inout[i]));
}

} // namespace oasr::rt
