// Steady-state strategies (docs/planner.md, "The steady-state step"): the
// same fused allreduces as any plan, and oasr.plan's `steady` entry says how
// the runtime runs them (docs/runtime.md, "Steady-state plans"): whether
// the next forward waits per layer, each group's pieces (groups in ready
// order: fc3, fc2, fc1), and the order of the pieces on the communication
// thread; predicted_iteration_us is the model's period.
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=bytescheduler:200000 alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=BS
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=oasr-barrier alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=BARRIER
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=oasr-step alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=STEP
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=bytescheduler:200000 alpha=1e-4 beta=1e-9" --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=bytescheduler:200000 alpha=1e-4 beta=1e-9" --oasr-plan-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=dear alpha=1e-4 beta=1e-9" 2>&1 | FileCheck %s --check-prefix=DEAR
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce="strategy=fastest alpha=1e-4 beta=1e-9" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// bytescheduler: one group per layer cut into pieces of at most 200000
// bytes (fc3 20.5 KB: 1; fc2 1.05 MB: 6; fc1 526 KB: 3), layer-index
// order: fc3's piece as soon as it is ready, fc2's first pieces while fc1
// computes, then fc1's (the next forward needs it first), fc2's rest.
// BS: predicted_iteration_us = 3422.61{{[0-9]*}} : f64, steady = {forward_waits = true, order = array<i64: 0, 0, 1, 0, 1, 1, 2, 0, 2, 1, 2, 2, 1, 2, 1, 3, 1, 4, 1, 5>, pieces = array<i64: 1, 6, 3>}, strategy = "bytescheduler:200000"
// BS-LABEL: func.func @train_step
// BS: oasr.allreduce_start %{{.*}}#1, %{{.*}}#2 {group = 0 : i64} : tensor<10x512xf32>, tensor<10xf32>
// BS: oasr.allreduce_start %{{.*}}#1, %{{.*}}#2 {group = 1 : i64} : tensor<512x512xf32>, tensor<512xf32>
// BS: oasr.allreduce_start %{{.*}}#1, %{{.*}}#2 {group = 2 : i64} : tensor<512x256xf32>, tensor<512xf32>

// Today's oasr groups as today's runtime runs them: a barrier.
// BARRIER: steady = {forward_waits = false, order = array<i64: 0, 0, 1, 0, 2, 0>, pieces = array<i64: 1, 1, 1>}, strategy = "oasr-barrier"

// oasr-step: the best plan found, with allreduces only (what the runtime
// runs); here fc2 in 2 pieces, layer-index order.
// STEP: steady = {forward_waits = true, order = array<i64: 0, 0, 1, 0, 2, 0, 1, 1>, pieces = array<i64: 1, 2, 1>}, strategy = "oasr-step"

// The report says the predicted time is the steady-state period.
// REPORT: oasr plan: model 'mlp3', strategy bytescheduler:200000, 3 groups
// REPORT: steady-state step: period 3422.61{{[0-9]*}} us (the next forward waits per layer, 10 allreduce(s) in the plan's order); the timeline above is the same groups' backward-only one
// JSON: "steady": {
// JSON-NEXT: "forward_waits": true,
// JSON-NEXT: "period_us": 3422.61
// JSON-NEXT: "pieces": 10

// DEAR: error: strategy 'dear' reduce-scatters and all-gathers; the runtime runs allreduce plans only (oasr-plan --steady scores it)
// UNKNOWN: error: unknown strategy 'fastest' (expected one of wfbp, single, ddp, horovod, mgwfbp, optimal, oasr, bucket:<bytes>), or a steady-state strategy (oasr-step, oasr-barrier, bytescheduler[:<bytes>])
