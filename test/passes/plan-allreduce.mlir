// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=wfbp | FileCheck %s --check-prefix=WFBP
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=single | FileCheck %s --check-prefix=SINGLE
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=v100 --oasr-plan-allreduce="strategy=bucket:1000000 alpha=1e-4 beta=1e-9" | FileCheck %s --check-prefix=BUCKET
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=v100 --oasr-plan-allreduce="strategy=optimal comm=%S/Inputs/comm.json" | FileCheck %s --check-prefix=COMM
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=v100 --oasr-plan-allreduce="alpha=1e-5 beta=1e-9 ranks=8" | FileCheck %s --check-prefix=RING
// Hand-annotated steps in this file, one behaviour per case:
// RUN: oasr-opt %s -split-input-file --oasr-plan-allreduce="alpha=1e-6 beta=1e-12" | FileCheck %s --check-prefixes=CHECK,NOOVER
// RUN: oasr-opt %s -split-input-file --oasr-plan-allreduce="alpha=1e-6 beta=1e-12 group-overhead-us=1000" | FileCheck %s --check-prefixes=CHECK,OVER
// RUN: oasr-opt %s -split-input-file --oasr-plan-allreduce="strategy=bucket:4000 alpha=1e-6 beta=1e-12" | FileCheck %s --check-prefixes=CHECK,B4K
// Errors: plan-allreduce-invalid.mlir.

// The Inputs/mlp3.mlir model, annotated from its profile or a roofline:

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
// SINGLE-LABEL: func.func @train_step
// SINGLE-NOT: oasr.allreduce_start
// SINGLE: %[[G1:.*]]:3 = oasr.node "GemmGrad"{{.*}}oasr.layer = "/fc1/Gemm"
// SINGLE-NEXT: %[[T:.*]] = oasr.allreduce_start %{{.*}}#1, %{{.*}}#2, %{{.*}}#1, %{{.*}}#2, %[[G1]]#1, %[[G1]]#2 {group = 0 : i64}
// SINGLE-NEXT: oasr.allreduce_wait %[[T]]
// SINGLE-NOT: oasr.allreduce_start

// bucket:1000000: fc3 alone, fc2.weight alone (over the cap), then the rest.
// BUCKET: groups = 3 : i64
// BUCKET-SAME: strategy = "bucket:1000000"
// BUCKET-LABEL: func.func @train_step
// BUCKET: oasr.allreduce_start %{{.*}}#1, %{{.*}}#2 {group = 0 : i64} : tensor<10x512xf32>, tensor<10xf32>
// BUCKET: oasr.allreduce_start %{{.*}}#1 {group = 1 : i64} : tensor<512x512xf32>
// BUCKET: oasr.allreduce_start %{{.*}}#2, %{{.*}}#1, %{{.*}}#2 {group = 2 : i64} : tensor<512xf32>, tensor<512x256xf32>, tensor<512xf32>
// BUCKET-NOT: oasr.allreduce_start

// COMM: alpha_s = 2.000000e-04 : f64, beta_s_per_byte = 1.000000e-09 : f64
// COMM-SAME: strategy = "optimal"
// COMM-LABEL: func.func @train_step
// COMM: oasr.allreduce_start

// Ring over 8 ranks: alpha = 2(P-1)*1e-5 s, beta = 2(P-1)/P * 1e-9 s/B.
// RING: alpha_s = 1.4{{[0-9]*}}E-4 : f64, beta_s_per_byte = 1.75{{[0-9]*}}E-9 : f64
// RING-SAME: strategy = "oasr"
// RING-LABEL: func.func @train_step
// RING: oasr.allreduce_start

// Three one-tensor layers of 100 us. Cheap communication: oasr keeps one
// group per layer. A 1000 us fixed cost per group (group-overhead-us) makes
// one group after backward the better plan. bucket:4000 holds one tensor.
// NOOVER: oasr.plan = {{{.*}}group_overhead_us = 0.000000e+00 : f64, groups = 3 : i64
// OVER: oasr.plan = {{{.*}}group_overhead_us = 1.000000e+03 : f64, groups = 1 : i64
// OVER-SAME: predicted_iteration_us = 1401.01{{[0-9]*}} : f64
// B4K: oasr.plan = {{{.*}}groups = 3 : i64{{.*}}strategy = "bucket:4000"
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%{{[^:]*}}: tensor<1000xf32> {oasr.input = "x"}, %[[A:[^:]*]]: tensor<1000xf32> {oasr.param = "a"}, %[[B:[^:]*]]: tensor<1000xf32> {oasr.param = "b"}, %[[C:[^:]*]]: tensor<1000xf32> {oasr.param = "c"})
// CHECK: %[[GC:.*]] = oasr.node "Neg"(%[[C]])
// NOOVER-NEXT: %[[T0:.*]] = oasr.allreduce_start %[[GC]] {group = 0 : i64} : tensor<1000xf32>
// B4K-NEXT: %[[T0:.*]] = oasr.allreduce_start %[[GC]] {group = 0 : i64} : tensor<1000xf32>
// CHECK-NEXT: %[[GB:.*]] = oasr.node "Neg"(%[[B]])
// NOOVER-NEXT: %[[T1:.*]] = oasr.allreduce_start %[[GB]] {group = 1 : i64} : tensor<1000xf32>
// B4K-NEXT: %[[T1:.*]] = oasr.allreduce_start %[[GB]] {group = 1 : i64} : tensor<1000xf32>
// CHECK-NEXT: %[[GA:.*]] = oasr.node "Neg"(%[[A]])
// NOOVER-NEXT: %[[T2:.*]] = oasr.allreduce_start %[[GA]] {group = 2 : i64} : tensor<1000xf32>
// NOOVER-NEXT: %[[R0:.*]] = oasr.allreduce_wait %[[T0]] : tensor<1000xf32>
// NOOVER-NEXT: %[[R1:.*]] = oasr.allreduce_wait %[[T1]] : tensor<1000xf32>
// NOOVER-NEXT: %[[R2:.*]] = oasr.allreduce_wait %[[T2]] : tensor<1000xf32>
// NOOVER-NEXT: return %{{.*}}, %[[R2]], %[[R1]], %[[R0]] :
// OVER-NEXT: %[[T:.*]] = oasr.allreduce_start %[[GC]], %[[GB]], %[[GA]] {group = 0 : i64} : tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>
// OVER-NEXT: %[[R:.*]]:3 = oasr.allreduce_wait %[[T]]
// OVER-NEXT: return %{{.*}}, %[[R]]#2, %[[R]]#1, %[[R]]#0 :
// B4K-NEXT: %[[T2:.*]] = oasr.allreduce_start %[[GA]] {group = 2 : i64} : tensor<1000xf32>
module attributes {oasr.model = "toy"} {
  func.func @train_step(%x: tensor<1000xf32> {oasr.input = "x"},
                        %a: tensor<1000xf32> {oasr.param = "a"},
                        %b: tensor<1000xf32> {oasr.param = "b"},
                        %c: tensor<1000xf32> {oasr.param = "c"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<1000xf32> {oasr.grad = "a"},
          tensor<1000xf32> {oasr.grad = "b"}, tensor<1000xf32> {oasr.grad = "c"}) {
    %l = oasr.node "ReduceMean"(%x) {keepdims = 0 : i64, oasr.cost = #oasr.cost<forward_us = 100.0>} : (tensor<1000xf32>) -> tensor<f32>
    %gc = oasr.node "Neg"(%c) {oasr.cost = #oasr.cost<backward_us = 100.0>, oasr.layer = "/c"} : (tensor<1000xf32>) -> tensor<1000xf32>
    %gb = oasr.node "Neg"(%b) {oasr.cost = #oasr.cost<backward_us = 100.0>, oasr.layer = "/b"} : (tensor<1000xf32>) -> tensor<1000xf32>
    %ga = oasr.node "Neg"(%a) {oasr.cost = #oasr.cost<backward_us = 100.0>, oasr.layer = "/a"} : (tensor<1000xf32>) -> tensor<1000xf32>
    return %l, %ga, %gb, %gc : tensor<f32>, tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf32>
  }
}

// -----

// One node makes two gradients. When they fall in two groups, both starts
// follow that node, in group order.
// NOOVER: oasr.plan = {{{.*}}groups = 1 : i64
// OVER: oasr.plan = {{{.*}}groups = 1 : i64
// B4K: oasr.plan = {{{.*}}groups = 2 : i64
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G:.*]]:2 = oasr.node "PairGrad"
// NOOVER-NEXT: %[[T:.*]] = oasr.allreduce_start %[[G]]#0, %[[G]]#1 {group = 0 : i64}
// OVER-NEXT: %[[T:.*]] = oasr.allreduce_start %[[G]]#0, %[[G]]#1 {group = 0 : i64}
// B4K-NEXT: %[[T0:.*]] = oasr.allreduce_start %[[G]]#0 {group = 0 : i64}
// B4K-NEXT: %[[T1:.*]] = oasr.allreduce_start %[[G]]#1 {group = 1 : i64}
// B4K-NEXT: %[[R0:.*]] = oasr.allreduce_wait %[[T0]]
// B4K-NEXT: %[[R1:.*]] = oasr.allreduce_wait %[[T1]]
// B4K-NEXT: return %{{.*}}, %[[R0]], %[[R1]] :
module attributes {oasr.model = "pair"} {
  func.func @train_step(%x: tensor<1000xf32> {oasr.input = "x"},
                        %w: tensor<1000xf32> {oasr.param = "w"},
                        %v: tensor<1000xf32> {oasr.param = "v"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<1000xf32> {oasr.grad = "w"},
          tensor<1000xf32> {oasr.grad = "v"}) {
    %l = oasr.node "ReduceMean"(%x) {keepdims = 0 : i64, oasr.cost = #oasr.cost<forward_us = 100.0>} : (tensor<1000xf32>) -> tensor<f32>
    %g:2 = oasr.node "PairGrad"(%w, %v) {oasr.cost = #oasr.cost<backward_us = 100.0>, oasr.layer = "/pair"} : (tensor<1000xf32>, tensor<1000xf32>) -> (tensor<1000xf32>, tensor<1000xf32>)
    return %l, %g#0, %g#1 : tensor<f32>, tensor<1000xf32>, tensor<1000xf32>
  }
}
