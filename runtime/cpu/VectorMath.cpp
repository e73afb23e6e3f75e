//===- VectorMath.cpp - libm's float functions over arrays ----------------===//
//
// The three variants of VectorMath.h's loops: each calls libmvec's entry
// of its lane width (_ZGV<isa>N<lanes>v_<f>, the x86-64 vector ABI) on
// whole vectors and libm on the tail.
//
//===----------------------------------------------------------------------===//

#include "VectorMath.h"
#include "VectorSums.h"

#include <cmath>
#include <immintrin.h>

extern "C" {
__m128 _ZGVbN4v_expf(__m128);
__m128 _ZGVbN4v_expm1f(__m128);
__m128 _ZGVbN4v_log1pf(__m128);
__m128 _ZGVbN4v_sinf(__m128);
__m128 _ZGVbN4v_cosf(__m128);
OASR_TARGET_AVX2 __m256 _ZGVdN8v_expf(__m256);
OASR_TARGET_AVX2 __m256 _ZGVdN8v_expm1f(__m256);
OASR_TARGET_AVX2 __m256 _ZGVdN8v_log1pf(__m256);
OASR_TARGET_AVX2 __m256 _ZGVdN8v_sinf(__m256);
OASR_TARGET_AVX2 __m256 _ZGVdN8v_cosf(__m256);
OASR_TARGET_AVX512 __m512 _ZGVeN16v_expf(__m512);
OASR_TARGET_AVX512 __m512 _ZGVeN16v_expm1f(__m512);
OASR_TARGET_AVX512 __m512 _ZGVeN16v_log1pf(__m512);
OASR_TARGET_AVX512 __m512 _ZGVeN16v_sinf(__m512);
OASR_TARGET_AVX512 __m512 _ZGVeN16v_cosf(__m512);
}

namespace oasr::rt::cpu {

static float scalar(VecFn f, float x) {
  switch (f) {
  case VecFn::Exp:
    return std::exp(x);
  case VecFn::Expm1:
    return std::expm1(x);
  case VecFn::Log1p:
    return std::log1p(x);
  case VecFn::Sin:
    return std::sin(x);
  case VecFn::Cos:
    return std::cos(x);
  case VecFn::Floor:
    return std::floor(x);
  case VecFn::Ceil:
    return std::ceil(x);
  case VecFn::Round:
    return std::nearbyint(x);
  }
  return x;
}

/// The rounding functions as loops the compiler vectorises; false for the
/// others.
OASR_VECTOR_KERNEL(bool, rounding,
                   (VecFn f, const float *x, float *y, int64_t n), {
                     switch (f) {
                     case VecFn::Floor:
                       for (int64_t i = 0; i < n; ++i)
                         y[i] = std::floor(x[i]);
                       return true;
                     case VecFn::Ceil:
                       for (int64_t i = 0; i < n; ++i)
                         y[i] = std::ceil(x[i]);
                       return true;
                     case VecFn::Round:
                       for (int64_t i = 0; i < n; ++i)
                         y[i] = std::nearbyint(x[i]);
                       return true;
                     default:
                       return false;
                     }
                   })

static void baseline(VecFn f, const float *x, float *y, int64_t n) {
  __m128 (*v)(__m128) = f == VecFn::Exp     ? _ZGVbN4v_expf
                        : f == VecFn::Expm1 ? _ZGVbN4v_expm1f
                        : f == VecFn::Log1p ? _ZGVbN4v_log1pf
                        : f == VecFn::Sin   ? _ZGVbN4v_sinf
                                            : _ZGVbN4v_cosf;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    _mm_storeu_ps(y + i, v(_mm_loadu_ps(x + i)));
  for (; i < n; ++i)
    y[i] = scalar(f, x[i]);
}

OASR_TARGET_AVX2 static void avx2(VecFn f, const float *x, float *y,
                                  int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_loadu_ps(x + i), r;
    switch (f) {
    case VecFn::Exp:
      r = _ZGVdN8v_expf(a);
      break;
    case VecFn::Expm1:
      r = _ZGVdN8v_expm1f(a);
      break;
    case VecFn::Log1p:
      r = _ZGVdN8v_log1pf(a);
      break;
    case VecFn::Sin:
      r = _ZGVdN8v_sinf(a);
      break;
    default:
      r = _ZGVdN8v_cosf(a);
      break;
    }
    _mm256_storeu_ps(y + i, r);
  }
  for (; i < n; ++i)
    y[i] = scalar(f, x[i]);
}

OASR_TARGET_AVX512 static void avx512(VecFn f, const float *x, float *y,
                                      int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 a = _mm512_loadu_ps(x + i), r;
    switch (f) {
    case VecFn::Exp:
      r = _ZGVeN16v_expf(a);
      break;
    case VecFn::Expm1:
      r = _ZGVeN16v_expm1f(a);
      break;
    case VecFn::Log1p:
      r = _ZGVeN16v_log1pf(a);
      break;
    case VecFn::Sin:
      r = _ZGVeN16v_sinf(a);
      break;
    default:
      r = _ZGVeN16v_cosf(a);
      break;
    }
    _mm512_storeu_ps(y + i, r);
  }
  for (; i < n; ++i)
    y[i] = scalar(f, x[i]);
}

void vectorMath(VecFn f, const float *x, float *y, int64_t n) {
  if (rounding(f, x, y, n))
    return;
  static void (*const run)(VecFn, const float *, float *, int64_t) =
      pickVectorVariant(&avx512, &avx2, &baseline);
  run(f, x, y, n);
}

} // namespace oasr::rt::cpu
