//===- Passes.h - oasr graph passes -----------------------------*- C++ -*-===//

#ifndef OASR_PASSES_PASSES_H
#define OASR_PASSES_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::oasr {

#define GEN_PASS_DECL
#include "oasr/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "oasr/Passes/Passes.h.inc"

/// Registers every oasr pass and pipeline with the global registry.
void registerAllPasses();

} // namespace mlir::oasr

#endif // OASR_PASSES_PASSES_H
