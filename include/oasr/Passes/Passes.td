//===- Passes.td - oasr graph passes -----------------------*- tablegen -*-===//
//
// Every oasr pass is declared here with a summary, a description of what it
// does and why, its options and its statistics. Each is implemented in one
// file under passes/.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_PASSES_PASSES_TD
#define OASR_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

#endif // OASR_PASSES_PASSES_TD
