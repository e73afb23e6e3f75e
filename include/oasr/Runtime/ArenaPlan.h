//===- ArenaPlan.h - Where each activation lives in the arena ---*- C++ -*-===//
//
// The executor keeps every activation, and every kernel's scratch, in one
// arena. Planning it is a pure function of the buffers' lifetimes, tested
// on its own (test/unit/Runtime/ArenaPlanTest.cpp) like lib/Schedule.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_ARENAPLAN_H
#define OASR_RUNTIME_ARENAPLAN_H

#include "llvm/ADT/ArrayRef.h"

#include <cstddef>
#include <limits>
#include <vector>

namespace oasr::rt {

/// One buffer of the arena: written by step `def`, last read by step
/// `lastUse` (kLive: it lives to the end of the step program), `bytes`
/// long. Buffers come in step order (by `def`); within a step, outputs
/// before the step's scratch.
struct ArenaBuffer {
  static constexpr int kLive = std::numeric_limits<int>::max();
  int def = 0;
  int lastUse = 0;
  size_t bytes = 0;
  /// An earlier buffer whose last use is this step and whose slot this one
  /// takes over (an elementwise op writing over its dying operand); -1: a
  /// slot of its own. A buffer is donated at most once.
  int donor = -1;
  /// Kernel scratch: alive during its step only.
  bool scratch = false;
};

/// Where the buffers go.
struct ArenaPlan {
  std::vector<size_t> offsets; ///< per buffer, aligned
  size_t bytes = 0;            ///< the arena's size
  /// The size without any reuse (every buffer its own aligned slot).
  size_t unsharedBytes = 0;
};

/// Plans the arena: each buffer takes the smallest free interval that fits
/// it (best fit), else grows the last free interval that touches the top,
/// else the top; buffers are freed after their last use's step (a step's
/// scratch after its outputs are placed), and neighbouring free intervals
/// merge. Without `reuse` every buffer gets its own slot. Sizes are rounded
/// up to `alignment` (a power of two); a buffer of 0 bytes still gets one.
ArenaPlan planArena(llvm::ArrayRef<ArenaBuffer> buffers, size_t alignment,
                    bool reuse);

} // namespace oasr::rt

#endif // OASR_RUNTIME_ARENAPLAN_H
