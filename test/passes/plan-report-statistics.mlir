// REQUIRES: pass-statistics
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=wfbp --oasr-plan-report=output=%t.txt -o /dev/null --mlir-pass-statistics --mlir-pass-statistics-display=list 2>&1 | FileCheck %s
// The statistics repeat the report's numbers (plan-report.mlir): 3 groups,
// 6 gradients, 1597480 bytes, 1727.550 us predicted, 1708.559 us bound.
// Debian's release LLVM has no LLVM_ENABLE_STATS: see lit.local.cfg.

// CHECK-LABEL: Pass statistics report
// CHECK-LABEL: {{^}}PlanReport
// CHECK-DAG: (S) {{ *}}3 groups {{ *}}- Allreduce groups reported
// CHECK-DAG: (S) {{ *}}6 grads {{ *}}- Gradients reported
// CHECK-DAG: (S) {{ *}}1597480 grad-bytes {{ *}}- Gradient bytes communicated
// CHECK-DAG: (S) {{ *}}1728 predicted-iteration-us {{ *}}- Predicted iteration time (microseconds, rounded)
// CHECK-DAG: (S) {{ *}}1709 lower-bound-us {{ *}}- Lower bound on the iteration time (microseconds, rounded)
