//===- VectorSums.h - Blocked sums in vector lanes --------------*- C++ -*-===//
//
// Private to runtime/cpu: the one way the CPU kernels sum many floats.
// Up to kSumBlock elements (or kRowBlock rows) collect in f32 vector lanes,
// the blocks in double, so no sum is one long running f32 sum
// (docs/precision.md). The build targets plain x86-64, so a kernel's hot
// loop is defined with OASR_VECTOR_KERNEL: GCC compiles it for AVX-512,
// AVX2 and the baseline, and the first call picks the variant of the
// vector ISA oneDNN dispatches to (dnnl::get_effective_cpu_isa), so
// ONEDNN_MAX_CPU_ISA caps oasr's own loops as it caps oneDNN's kernels:
// ONEDNN_MAX_CPU_ISA=AVX2 computes on an AVX-512 machine what an AVX2
// machine computes, and SSE41 runs the baseline variants.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CPU_VECTORSUMS_H
#define OASR_RUNTIME_CPU_VECTORSUMS_H

#include "oasr/Runtime/LowFloat.h"

#include <algorithm>
#include <cstdint>

namespace oasr::rt::cpu {

/// The vector variants OASR_VECTOR_KERNEL compiles.
enum class VectorIsa { Baseline, Avx2, Avx512 };

/// The variant this process runs: the best the CPU has, capped by
/// ONEDNN_MAX_CPU_ISA (through oneDNN's effective ISA). Decided once.
VectorIsa vectorIsa();

/// `avx512`, `avx2` or `baseline` (the start line names it).
const char *vectorIsaName(VectorIsa isa);

/// The variant of `isa` among three compilations of one function.
template <typename Fn> Fn pickVectorVariant(Fn avx512, Fn avx2, Fn baseline) {
  switch (vectorIsa()) {
  case VectorIsa::Avx512:
    return avx512;
  case VectorIsa::Avx2:
    return avx2;
  case VectorIsa::Baseline:
    break;
  }
  return baseline;
}

} // namespace oasr::rt::cpu

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OASR_TARGET_AVX512 __attribute__((target("avx512f")))
#define OASR_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define OASR_TARGET_AVX512
#define OASR_TARGET_AVX2
#endif

/// Defines `name` as a function pointer of type `ret (*) params` to the
/// body `...` compiled three times (AVX-512, AVX2, baseline), the variant
/// chosen at static initialisation by vectorIsa(). The body may contain
/// commas.
// clang-format off
#define OASR_VECTOR_KERNEL(ret, name, params, ...)                             \
  OASR_TARGET_AVX512 static ret name##Avx512 params __VA_ARGS__                \
  OASR_TARGET_AVX2 static ret name##Avx2 params __VA_ARGS__                    \
  static ret name##Baseline params __VA_ARGS__                                 \
  static ret(*const name) params = ::oasr::rt::cpu::pickVectorVariant(         \
      &name##Avx512, &name##Avx2, &name##Baseline);
// clang-format on

namespace oasr::rt::cpu {

/// Elements one f32 lane sum covers before it is added into a double.
constexpr int64_t kSumBlock = 256;
/// Rows whose column sums collect in f32 before they are added in double.
constexpr int64_t kRowBlock = 32;

inline float loadF(const float *p, int64_t i) { return p[i]; }
inline float loadF(const uint16_t *p, int64_t i) { return bf16ToFloat(p[i]); }
inline void storeF(float *p, int64_t i, float v) { p[i] = v; }
inline void storeF(uint16_t *p, int64_t i, float v) { p[i] = floatToBF16(v); }

/// sum_c f(c) over [0, n): f32 lanes within a block, the blocks in double.
template <typename F>
[[gnu::always_inline]] inline double blockSum(int64_t n, F &&f) {
  double total = 0;
  for (int64_t c0 = 0; c0 < n; c0 += kSumBlock) {
    const int64_t c1 = std::min(n, c0 + kSumBlock);
    float acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t c = c0; c < c1; ++c)
      acc += f(c);
    total += acc;
  }
  return total;
}

/// Column sums over `rows` rows: total[c] += sum_r row(r)(c) for c in
/// [0, w), w <= kSumBlock (`row(r)` gives row r's element function once per
/// row); kRowBlock rows in f32 lanes, the row blocks in double.
template <typename F>
[[gnu::always_inline]] inline void columnSums(int64_t rows, int64_t w,
                                              double *total, F &&row) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t r1 = std::min(rows, r0 + kRowBlock);
    float acc[kSumBlock] = {0};
    for (int64_t r = r0; r < r1; ++r) {
      auto f = row(r);
#pragma omp simd
      for (int64_t c = 0; c < w; ++c)
        acc[c] += f(c);
    }
    for (int64_t c = 0; c < w; ++c)
      total[c] += acc[c];
  }
}

} // namespace oasr::rt::cpu

#endif // OASR_RUNTIME_CPU_VECTORSUMS_H
