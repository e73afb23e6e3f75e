// compress= errors, reported on the module before any rewrite.
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=powersgd:0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=powersgd:-3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=powersgd" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NORANK
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=auto:4-2000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HIGH
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=topk" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=auto grad-dtype=f16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WIRE
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=auto strategy=dear" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEAR
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=powersgd:2 strategy=bytescheduler:1MB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARTS
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="strategy=wfbp compress=auto" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOMODEL
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 compress=auto compress-gmacs=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GMACS
// The verifier: a rank below 1, factors of a non-f32 gradient, and factors
// in f16.
// RUN: oasr-opt %s -split-input-file -verify-diagnostics

// ZERO: error: 'compress='powersgd:0': the rank must be at least 1 and at most 1024 (expected off, powersgd:R or auto[:R[-M]], R the rank and M auto's highest, 1 to 1024)
// NEG: error: 'compress='powersgd:-3': the rank must be at least 1 and at most 1024
// NORANK: error: 'compress='powersgd': powersgd needs its rank
// HIGH: error: 'compress='auto:4-2000': the highest rank must be at least 1 and at most 1024
// UNKNOWN: error: 'compress='topk': unknown form
// WIRE: error: 'compress=auto': PowerSGD's factors are not scaled, and P = M Q can pass f16's range; send them in bf16 ('grad-dtype=bf16') or f32
// DEAR: error: strategy 'dear' reduce-scatters its groups, and PowerSGD (compress=auto:8) sends a group whole; steady-state plans compress with oasr-step or oasr-barrier
// PARTS: error: strategy 'bytescheduler:1MB' partitions its groups, and PowerSGD (compress=powersgd:2) sends a group whole; steady-state plans compress with oasr-step or oasr-barrier
// NOMODEL: error: 'compress=auto' chooses each group's form on the allreduce model, and strategy 'wfbp' was given none: give 'comm=', 'alpha' and 'beta', or 'compress=powersgd:R'
// GMACS: error: 'compress-gmacs' must be > 0, got 0

func.func @zero(%g: tensor<4x4xf32>) {
  // expected-error @+1 {{powersgd_rank must be at least 1, got 0}}
  %t = oasr.allreduce_start %g {group = 0 : i64, powersgd_rank = 0 : i64} : tensor<4x4xf32>
  %r = oasr.allreduce_wait %t : tensor<4x4xf32>
  return
}

// -----

func.func @half(%g: tensor<4x4xf16>) {
  // expected-error @+1 {{gradient #0 is not f32: PowerSGD compresses f32 gradients}}
  %t = oasr.allreduce_start %g {group = 0 : i64, powersgd_rank = 2 : i64} : tensor<4x4xf16>
  %r = oasr.allreduce_wait %t : tensor<4x4xf16>
  return
}

// -----

func.func @f16wire(%g: tensor<4x4xf32>) {
  // expected-error @+1 {{powersgd_rank sends f32 or bf16 factors; wire_type is 'f16'}}
  %t = oasr.allreduce_start %g {group = 0 : i64, powersgd_rank = 2 : i64, wire_type = f16} : tensor<4x4xf32>
  %r = oasr.allreduce_wait %t : tensor<4x4xf32>
  return
}
