//===- Passes.h - oasr graph passes -----------------------------*- C++ -*-===//
//
// The training passes (autodiff, cost annotation, allreduce planning, gradient
// buffer layout, optimizer insertion, plan report) and the training pipeline.
// Everything is declared in Passes.td; this header adds the pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_PASSES_PASSES_H
#define OASR_PASSES_PASSES_H

#include "oasr/Dialect/OASRDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
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
