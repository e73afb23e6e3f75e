//===- LowFloat.cpp - f32 <-> bf16/f16 elements ---------------------------===//
//
// Bit-exact conversions (round to nearest, ties to even), written out rather
// than left to the compiler's _Float16 so that every host gives the same
// bits; the unit tests check them against _Float16 and the CUDA intrinsics
// use the same rounding.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/LowFloat.h"

#include <cstring>

namespace oasr::rt {

static uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

static float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// Rounds `v >> shift` to nearest, ties to even.
static uint32_t shiftRoundEven(uint32_t v, unsigned shift) {
  uint32_t r = v >> shift;
  uint32_t rem = v & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u)))
    ++r;
  return r;
}

uint16_t floatToF16(float x) {
  uint32_t u = bitsOf(x);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) // infinity, NaN (quiet, sign kept)
    return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (a >= 0x477ff000u) // >= 65520: rounds beyond 65504
    return sign | 0x7c00u;
  unsigned exp = a >> 23;
  if (exp >= 113) {
    // Normal in f16: rebias the exponent, round 23 mantissa bits to 10
    // (a carry moves into the exponent, as it should).
    uint32_t v = ((exp - 112) << 23) | (a & 0x7fffffu);
    return sign | uint16_t(shiftRoundEven(v, 13));
  }
  if (a < 0x33000000u) // <= 2^-25: rounds to zero (2^-25 ties to even 0)
    return sign;
  // Subnormal in f16: units of 2^-24; the value is mant * 2^(exp - 126).
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  return sign | uint16_t(shiftRoundEven(mant, 126 - exp));
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    float v = float(mant) * 5.9604644775390625e-8f;
    return floatOf(sign | bitsOf(v));
  }
  if (exp == 31)
    return floatOf(sign | 0x7f800000u | (mant << 13));
  return floatOf(sign | ((exp + 112) << 23) | (mant << 13));
}

void widenToF32(DType type, const void *src, float *dst, size_t n) {
  const uint16_t *h = static_cast<const uint16_t *>(src);
  if (type == DType::BF16) {
    for (size_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(h[i]);
  } else {
    for (size_t i = 0; i < n; ++i)
      dst[i] = f16ToFloat(h[i]);
  }
}

void narrowFromF32(DType type, const float *src, void *dst, size_t n) {
  uint16_t *h = static_cast<uint16_t *>(dst);
  if (type == DType::BF16) {
    for (size_t i = 0; i < n; ++i)
      h[i] = floatToBF16(src[i]);
  } else {
    for (size_t i = 0; i < n; ++i)
      h[i] = floatToF16(src[i]);
  }
}

} // namespace oasr::rt
