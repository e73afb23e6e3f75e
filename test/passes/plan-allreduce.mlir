// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=wfbp | FileCheck %s --check-prefix=WFBP
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=single | FileCheck %s --check-prefix=SINGLE
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=v100 --oasr-plan-allreduce="strategy=bucket:1000000 alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=BUCKET
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=v100 --oasr-plan-allreduce="strategy=optimal comm=%S/Inputs/comm.json" | FileCheck %s --check-prefix=COMM
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=v100 --oasr-plan-allreduce="alpha=1e-5 beta=1e-9 ranks=8" | FileCheck %s --check-prefix=RING

// wfbp: one group per layer; each start right after the GemmGrad that makes
// its layer's gradients ready, the waits before the return, in group order.
// WFBP: oasr.plan = {alpha_s = 9.750000e-05 : f64, beta_s_per_byte = 3.060000e-10 : f64, group_overhead_us = 0.000000e+00 : f64, groups = 3 : i64, lower_bound_us = {{.*}}, predicted_iteration_us = 1727.5497{{[0-9]*}} : f64, strategy = "wfbp", update_us = 0.000000e+00 : f64}
// WFBP-LABEL: func.func @train_step
// WFBP: %[[G3:.*]]:3 = oasr.node "GemmGrad"{{.*}}oasr.layer = "/fc3/Gemm"
// WFBP-NEXT: %[[T0:.*]] = oasr.allreduce_start %[[G3]]#1, %[[G3]]#2 {group = 0 : i64} : tensor<10x512xf32>, tensor<10xf32>
// WFBP-NEXT: oasr.node "ReluGrad"
// WFBP-NEXT: %[[G2:.*]]:3 = oasr.node "GemmGrad"{{.*}}oasr.layer = "/fc2/Gemm"
// WFBP-NEXT: %[[T1:.*]] = oasr.allreduce_start %[[G2]]#1, %[[G2]]#2 {group = 1 : i64}
// WFBP-NEXT: oasr.node "ReluGrad"
// WFBP-NEXT: %[[G1:.*]]:3 = oasr.node "GemmGrad"{{.*}}oasr.layer = "/fc1/Gemm"
// WFBP-NEXT: %[[T2:.*]] = oasr.allreduce_start %[[G1]]#1, %[[G1]]#2 {group = 2 : i64}
// WFBP-NEXT: %[[R0:.*]]:2 = oasr.allreduce_wait %[[T0]] : tensor<10x512xf32>, tensor<10xf32>
// WFBP-NEXT: %[[R1:.*]]:2 = oasr.allreduce_wait %[[T1]]
// WFBP-NEXT: %[[R2:.*]]:2 = oasr.allreduce_wait %[[T2]]
// WFBP-NEXT: return %{{.*}}, %[[R2]]#0, %[[R2]]#1, %[[R1]]#0, %[[R1]]#1, %[[R0]]#0, %[[R0]]#1

// single: one group after the whole backward (Sync SGD).
// SINGLE: groups = 1 : i64
// SINGLE: %[[G1:.*]]:3 = oasr.node "GemmGrad"{{.*}}oasr.layer = "/fc1/Gemm"
// SINGLE-NEXT: %[[T:.*]] = oasr.allreduce_start %{{.*}}#1, %{{.*}}#2, %{{.*}}#1, %{{.*}}#2, %[[G1]]#1, %[[G1]]#2 {group = 0 : i64}
// SINGLE-NEXT: oasr.allreduce_wait %[[T]]
// SINGLE-NOT: oasr.allreduce_start

// bucket:1000000: fc3 alone, fc2.weight alone (over the cap), then the rest.
// BUCKET: groups = 3 : i64
// BUCKET-SAME: strategy = "bucket:1000000"
// BUCKET: oasr.allreduce_start %{{.*}}#1, %{{.*}}#2 {group = 0 : i64} : tensor<10x512xf32>, tensor<10xf32>
// BUCKET: oasr.allreduce_start %{{.*}}#1 {group = 1 : i64} : tensor<512x512xf32>
// BUCKET: oasr.allreduce_start %{{.*}}#2, %{{.*}}#1, %{{.*}}#2 {group = 2 : i64} : tensor<512xf32>, tensor<512x256xf32>, tensor<512xf32>

// COMM: alpha_s = 2.000000e-04 : f64, beta_s_per_byte = 1.000000e-09 : f64
// COMM-SAME: strategy = "optimal"

// Ring over 8 ranks: alpha = 2(P-1)*1e-5 s, beta = 2(P-1)/P * 1e-9 s/B.
// RING: alpha_s = 1.4{{[0-9]*}}E-4 : f64, beta_s_per_byte = 1.75{{[0-9]*}}E-9 : f64
