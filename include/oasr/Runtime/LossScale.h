//===- LossScale.h - Dynamic loss scaling for f16 steps ---------*- C++ -*-===//
//
// f16 has a narrow range: gradients below 6e-8 flush to zero. A step
// compiled for f16 multiplies the loss gradient that starts backward by a
// scale S, so gradients travel S times larger, and the update divides them
// by S again. A step whose gradients overflowed (Inf/NaN anywhere) is
// skipped and S halved; after `growthInterval` good steps in a row S
// doubles. PyTorch's GradScaler does the same with the same defaults.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_LOSSSCALE_H
#define OASR_RUNTIME_LOSSSCALE_H

#include <cstdint>

namespace oasr::rt {

struct LossScaler {
  double scale = 65536.0; ///< 2^16, GradScaler's init_scale
  double growthFactor = 2.0, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  int64_t goodSteps = 0; ///< finite steps since the scale last changed
  int64_t skipped = 0;   ///< steps skipped so far

  /// After a step whose gradients were all finite (`finite`) or not.
  void update(bool finite) {
    if (!finite) {
      scale *= backoffFactor;
      goodSteps = 0;
      ++skipped;
      return;
    }
    if (++goodSteps >= growthInterval) {
      scale *= growthFactor;
      goodSteps = 0;
    }
  }
};

} // namespace oasr::rt

#endif // OASR_RUNTIME_LOSSSCALE_H
