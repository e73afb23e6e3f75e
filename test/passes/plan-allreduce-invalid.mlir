// Option errors (reported on the module, before any rewrite).
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce=strategy=fastest -o /dev/null 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce=strategy=bucket:0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOCOMM
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce=alpha=1e-4 -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALPHA
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce=beta=1e-9 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 comm=%S/Inputs/comm.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXCLUSIVE
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=ranks=8 -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 ranks=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 group-overhead-us=-5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVERHEAD
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 overlap-rate=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OVERLAP
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce=comm=%S/Inputs/missing.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMMFILE
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=-2e-4 beta=1e-9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGALPHA
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="alpha=1e-4 beta=-3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGBETA
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 grad-dtype=f8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GRADDTYPE
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="alpha=1e-4 beta=1e-9 grad-dtype=fp16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GRADDTYPE2

// STRATEGY: error: unknown strategy 'fastest' (expected one of wfbp, single, ddp, horovod, mgwfbp, optimal, oasr, bucket:<bytes>, oasr-barrier, bytescheduler[:<bytes>], dear[:<bytes>], oasr-step)
// BUCKET: error: strategy 'bucket:0': the bucket size must be a positive number of bytes, optionally with a KB/MB/GB or KiB/MiB/GiB suffix
// NOCOMM: error: strategy 'oasr' needs a communication model (the allreduce time alpha + beta * bytes): measure one on the ranks and network you train on with `mpirun -np P oasr-bench comm --out=comm.json` and give 'comm=comm.json', or give 'alpha' and 'beta', or a profile with a 'comm' object to --oasr-annotate-cost; wfbp, single, bucket:<bytes>, ddp and horovod plan without one
// NOCOMM-NOT: see current operation
// ALPHA: error: 'alpha' needs 'beta'
// NEGALPHA: error: 'alpha' must be >= 0, got -2.000000e-04
// NEGBETA: error: 'beta' must be >= 0, got -3.000000e+00
// BETA: error: 'beta' needs 'alpha'
// EXCLUSIVE: error: 'alpha'/'beta' and 'comm' are mutually exclusive
// RANKS: error: 'ranks' needs 'alpha' and 'beta' (the per-step ring latency and inverse bandwidth) and must be >= 1
// OVERHEAD: error: 'group-overhead-us' must be >= 0
// OVERLAP: error: 'overlap-rate' must be in [0, 1] (the rate communication progresses while backward computes), got 2
// COMMFILE: error: cannot read the communication model: {{.*}}missing.json
// GRADDTYPE: error: 'grad-dtype' must be f32, bf16 or f16 (the element type gradients travel in), got 'f8'
// GRADDTYPE2: error: 'grad-dtype' must be f32, bf16 or f16 (the element type gradients travel in), got 'fp16'

// Errors on the step.
// RUN: oasr-opt %s --oasr-plan-allreduce="alpha=1e-4 beta=1e-9" -split-input-file -verify-diagnostics

// expected-error @+1 {{--oasr-plan-allreduce needs a 'func.func @train_step' (run --oasr-autodiff first)}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{nodes without 'oasr.cost': run --oasr-annotate-cost first}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %ga : tensor<f32>, tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{@train_step is already planned}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64, oasr.cost = #oasr.cost<forward_us = 1.0>} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.cost = #oasr.cost<backward_us = 1.0>, oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    %t = oasr.allreduce_start %ga {group = 0 : i64} : tensor<4xf32>
    %r = oasr.allreduce_wait %t : tensor<4xf32>
    return %l, %r : tensor<f32>, tensor<4xf32>
  }
}
