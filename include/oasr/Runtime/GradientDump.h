//===- GradientDump.h - Writes a step's weights and gradients ---*- C++ -*-===//
//
// What `oasr-run --dump-grads=FILE` writes after the last step: the loss,
// every parameter's value and averaged gradient, and the f32 state tensors
// (BatchNorm statistics). Two formats, chosen by the extension:
//  * FILE.npz: NumPy's zip of .npy arrays (stored, little-endian f4) with
//    the keys "loss", "NAME.value", "NAME.grad" and "NAME.state"; read it
//    with numpy.load. Binary and streamed: ResNeXt-50's gradients are 100 MB
//    here against 1.1 GB of JSON.
//  * anything else: JSON {"loss", "ranks", "params": {NAME: {"shape",
//    "grad", "value", "grad_abs_sum"}}, "state": {NAME: {"value"}}}, for
//    small models and tests. "grad_abs_sum" is, per element, the sum over
//    ranks of |each rank's own gradient| in the last step, before
//    averaging: what bounds how much two summation orders of that average
//    may differ ((ranks - 1) u grad_abs_sum / ranks, u = 2^-24), so tests
//    derive their tolerances from it (test/runtime/Inputs/compare_weights.py).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_GRADIENTDUMP_H
#define OASR_RUNTIME_GRADIENTDUMP_H

#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace oasr::rt {

class Executor;

/// Per parameter, |its gradient| elementwise: one rank's own in the last
/// step (Trainer records it), then summed over the ranks.
struct GradientMagnitudes {
  std::map<std::string, std::vector<float>> abs;
  int ranks = 1; ///< ranks summed into `abs`
};

/// Writes the dump of `exec`'s current parameters, gradients and state to
/// `path` (.npz or JSON by extension), with `magnitudes` (JSON only) when
/// given.
llvm::Error writeGradientDump(const std::string &path, Executor &exec,
                              const GradientMagnitudes *magnitudes = nullptr);

} // namespace oasr::rt

#endif // OASR_RUNTIME_GRADIENTDUMP_H
