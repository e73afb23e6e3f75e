// Steady-state strategies (docs/planner.md, "The steady-state step"): the
// same fused allreduces as any plan, and oasr.plan's `steady` entry says how
// the runtime runs them (docs/runtime.md, "Steady-state plans"): whether
// the next forward waits per layer, each group's pieces and collective form
// (groups in ready order: fc3, fc2, fc1; `scatter` 1: reduce-scatter, then
// all-gather of the averaged gradients), and the order of the units on the
// communication thread as (group, piece, all-gather) triples;
// predicted_iteration_us is the model's period.
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=bytescheduler:200000 alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=BS
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=oasr-barrier alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=BARRIER
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=oasr-step alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=STEP
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=bytescheduler:200000 alpha=1e-4 beta=1e-9" --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=bytescheduler:200000 alpha=1e-4 beta=1e-9" --oasr-plan-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=dear alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=DEAR
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=dear alpha=1e-4 beta=1e-9" --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=DEAR-REPORT
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=dear alpha=1e-4 beta=1e-9 grad-dtype=bf16" 2>&1 | FileCheck %s --check-prefix=DEAR-BF16
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=fastest alpha=1e-4 beta=1e-9" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// bytescheduler: one group per layer cut into pieces of at most 200000
// bytes (fc3 20.5 KB: 1; fc2 1.05 MB: 6; fc1 526 KB: 3), layer-index
// order: fc3's piece as soon as it is ready, fc2's first pieces while fc1
// computes, then fc1's (the next forward needs it first), fc2's rest.
// BS: predicted_iteration_us = 3422.61{{[0-9]*}} : f64, steady = {forward_waits = true, order = array<i64: 0, 0, 0, 1, 0, 0, 1, 1, 0, 2, 0, 0, 2, 1, 0, 2, 2, 0, 1, 2, 0, 1, 3, 0, 1, 4, 0, 1, 5, 0>, pieces = array<i64: 1, 6, 3>, scatter = array<i64: 0, 0, 0>}, strategy = "bytescheduler:200000"
// BS-LABEL: func.func @train_step
// BS: oasr.allreduce_start %{{.*}}#1, %{{.*}}#2 {group = 0 : i64} : tensor<10x512xf32>, tensor<10xf32>
// BS: oasr.allreduce_start %{{.*}}#1, %{{.*}}#2 {group = 1 : i64} : tensor<512x512xf32>, tensor<512xf32>
// BS: oasr.allreduce_start %{{.*}}#1, %{{.*}}#2 {group = 2 : i64} : tensor<512x256xf32>, tensor<512xf32>

// Today's oasr groups as today's runtime runs them: a barrier.
// BARRIER: steady = {forward_waits = false, order = array<i64: 0, 0, 0, 1, 0, 0, 2, 0, 0>, pieces = array<i64: 1, 1, 1>, scatter = array<i64: 0, 0, 0>}, strategy = "oasr-barrier"

// oasr-step: the best plan found; here every layer reduce-scatters, in
// layer-index order: fc3's reduce-scatter as soon as it is ready and its
// all-gather while fc2's backward still runs, fc2's reduce-scatter, then
// fc1's reduce-scatter and all-gather (the next forward needs fc1 first),
// then fc2's all-gather.
// STEP: predicted_iteration_us = 2722.61{{[0-9]*}} : f64, steady = {forward_waits = true, order = array<i64: 0, 0, 0, 0, 0, 1, 1, 0, 0, 2, 0, 0, 2, 0, 1, 1, 0, 1>, pieces = array<i64: 1, 1, 1>, scatter = array<i64: 1, 1, 1>}, strategy = "oasr-step"

// The report says the predicted time is the steady-state period.
// REPORT: oasr plan: model 'mlp3', strategy bytescheduler:200000, 3 groups
// REPORT: steady-state step: period 3422.61{{[0-9]*}} us (the next forward waits per layer, 10 allreduce(s) in the plan's order); the timeline above is the same groups' backward-only one
// JSON: "steady": {
// JSON-NEXT: "forward_waits": true,
// JSON-NEXT: "period_us": 3422.61
// JSON-NEXT: "pieces": 10

// dear: DeAR's 25 MB buckets hold the whole 1.6 MB model: one group that
// reduce-scatters, then all-gathers.
// DEAR: predicted_iteration_us = 3147.48{{[0-9]*}} : f64, steady = {forward_waits = true, order = array<i64: 0, 0, 0, 0, 0, 1>, pieces = array<i64: 1>, scatter = array<i64: 1>}, strategy = "dear"
// DEAR-REPORT: steady-state step: period 3147.48{{[0-9]*}} us (the next forward waits per layer, 0 allreduce(s) and 1 reduce-scatter(s) with their all-gather(s) in the plan's order)
// DEAR-BF16: error: strategy 'dear' reduce-scatters and all-gathers, which this plan may not (gradients sent as bf16/f16 are allreduced only)
// UNKNOWN: error: unknown strategy 'fastest' (expected one of wfbp, single, ddp, horovod, mgwfbp, optimal, oasr, bucket:<bytes>, oasr-barrier, bytescheduler[:<bytes>], dear[:<bytes>], oasr-step)
