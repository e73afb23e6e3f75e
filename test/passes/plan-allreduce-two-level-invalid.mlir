// two-level= errors, reported on the module before any rewrite, and a
// calibration whose second tier does not divide its ranks.
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="comm=%S/Inputs/comm-two-level.json two-level=ring" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 two-level=two-level" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTIER
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="comm=%S/Inputs/comm-two-level.json two-level=two-level strategy=oasr-step" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STEADY
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="comm=%S/Inputs/comm-two-level-bad.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADTIER
// The verifier: two_level with f16 gradients.
// RUN: oasr-opt %s -split-input-file -verify-diagnostics

// UNKNOWN: error: 'two-level='ring': expected auto, flat or two-level
// NOTIER: error: 'two-level=two-level': the communication model has no second tier (a calibration's 'two_level', which oasr-bench comm writes where ranks share nodes)
// STEADY: error: 'two-level=two-level' sends every group as a two-level allreduce; steady-state plans keep one tier, so it does not combine with 'strategy=oasr-step'
// BADTIER: comm-two-level-bad.json: two_level: 'ranks_per_node' must be at least 2 and divide 'ranks' (4) into two or more nodes, got 3 (line 2 column 

func.func @half(%g: tensor<4x4xf16>) {
  // expected-error @+1 {{gradient #0 is not f32: two_level sums f32 gradients in the node}}
  %t = oasr.allreduce_start %g {group = 0 : i64, two_level} : tensor<4x4xf16>
  %r = oasr.allreduce_wait %t : tensor<4x4xf16>
  return
}
