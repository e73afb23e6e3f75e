//===- Lower.h - A compiled module as a Program ------------------*- C++
//-*-===//
//
// The last step of compilation (the lowering library, lib/Lower): the
// training module's @train_step as the plain Program the runtime loads
// (Program.h), in process or from an .oasrprog file.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_LOWER_LOWER_H
#define OASR_LOWER_LOWER_H

#include "oasr/Runtime/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

namespace oasr::rt {

/// Lowers `@train_step` of a compiled training module. Errors name the op
/// (its location) and the reason; a module without a training step or
/// without optimizer updates is rejected as "not compiled for training".
llvm::Expected<Program> lowerToProgram(mlir::ModuleOp module);

} // namespace oasr::rt

#endif // OASR_LOWER_LOWER_H
