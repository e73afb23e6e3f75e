//===- VectorMath.h - libm's float functions over arrays -------*- C++ -*-===//
//
// Private to runtime/cpu: y[i] = f(x[i]) for the libm functions the
// activations need, through glibc's vector math library (libmvec: 4, 8 or
// 16 lanes per call, within 4 ulp of the correctly rounded value, IEEE
// special values kept), in the variant of the vector ISA the kernels run
// (vectorIsa(), VectorSums.h), so ONEDNN_MAX_CPU_ISA caps these too. `y`
// may be `x`.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CPU_VECTORMATH_H
#define OASR_RUNTIME_CPU_VECTORMATH_H

#include <cstdint>

namespace oasr::rt::cpu {

/// Floor, Ceil and Round (half to even) are plain loops, compiled without
/// trapping math so they vectorise (no code here reads the FP flags).
enum class VecFn { Exp, Expm1, Log1p, Sin, Cos, Floor, Ceil, Round };

void vectorMath(VecFn f, const float *x, float *y, int64_t n);

} // namespace oasr::rt::cpu

#endif // OASR_RUNTIME_CPU_VECTORMATH_H
