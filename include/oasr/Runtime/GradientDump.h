//===- GradientDump.h - Writes a step's weights and gradients ---*- C++ -*-===//
//
// What `oasr-run --dump-grads=FILE` writes after the last step: the loss,
// every parameter's value and averaged gradient, and the f32 state tensors
// (BatchNorm statistics). Two formats, chosen by the extension:
//  * FILE.npz: NumPy's zip of .npy arrays (stored, little-endian f4) with
//    the keys "loss", "NAME.value", "NAME.grad" and "NAME.state"; read it
//    with numpy.load. Binary and streamed: ResNeXt-50's gradients are 100 MB
//    here against 1.1 GB of JSON.
//  * anything else: JSON {"loss", "params": {NAME: {"shape", "grad",
//    "value"}}, "state": {NAME: {"value"}}}, for small models and tests.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_GRADIENTDUMP_H
#define OASR_RUNTIME_GRADIENTDUMP_H

#include "llvm/Support/Error.h"

#include <string>

namespace oasr::rt {

class Executor;

/// Writes the dump of `exec`'s current parameters, gradients and state to
/// `path` (.npz or JSON by extension).
llvm::Error writeGradientDump(const std::string &path, Executor &exec);

} // namespace oasr::rt

#endif // OASR_RUNTIME_GRADIENTDUMP_H
