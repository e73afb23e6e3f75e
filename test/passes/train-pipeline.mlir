// The whole pipeline on the models under Inputs/ (one RUN group per case).
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="device=h100 alpha=9.75e-5 beta=3.06e-10 algo=momentum lr=0.1" -o %t.mlir
// RUN: FileCheck %s --check-prefix=CHECK < %t.mlir
// RUN: %python %S/Inputs/check_step.py %t.mlir | FileCheck %s --check-prefix=STRUCT
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="profile=%S/Inputs/mlp3.profile.json strategy=wfbp report=true" -o %t.wfbp.mlir | FileCheck %s --check-prefix=REPORT
// RUN: %python %S/Inputs/check_step.py %t.wfbp.mlir | FileCheck %s --check-prefix=STRUCT-WFBP
// RUN: oasr-opt %S/Inputs/autodiff-cnn.mlir --oasr-train-pipeline="device=v100 strategy=mgwfbp alpha=2.36e-4 beta=4.06e-10" -o %t.cnn.mlir
// RUN: %python %S/Inputs/check_step.py %t.cnn.mlir | FileCheck %s --check-prefix=STRUCT-CNN
// group-overhead-us is forwarded to --oasr-plan-allreduce:
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="profile=%S/Inputs/mlp3.profile.json" | FileCheck %s --check-prefixes=OVER-COMMON,NOOVER
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="profile=%S/Inputs/mlp3.profile.json group-overhead-us=2000" | FileCheck %s --check-prefixes=OVER-COMMON,OVER
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="strategy=nope alpha=1e-4 beta=1e-9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="alpha=1e-4 beta=1e-9 group-overhead-us=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD-OVER

// Every pass ran: costs, the plan (default strategy oasr), buffer offsets,
// momentum buffers as arguments, updates right after each wait.
// CHECK: module attributes {oasr.cost_model = {{.*}}, oasr.model = "mlp3", oasr.opset = 17 : i64, oasr.plan = {{{.*}}strategy = "oasr"{{.*}}}}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {oasr.opt_state = "fc1.weight"}
// CHECK-SAME: -> (tensor<f32> {oasr.output = "loss"}, tensor<512x256xf32> {oasr.new_param = "fc1.weight"}
// CHECK: oasr.allreduce_start {{.*}}buffer_bytes = {{.*}}offsets = array<i64: 0
// CHECK: oasr.allreduce_wait
// CHECK-NEXT: oasr.optimizer_update "momentum"

// STRUCT: check_step: OK: 6 parameters, {{[1-3]}} groups, 6 gradients
// STRUCT-WFBP: check_step: OK: 6 parameters, 3 groups, 6 gradients
// STRUCT-CNN: check_step: OK: 5 parameters, {{[0-9]+}} groups, 5 gradients
// report=true prints the plan report (the step goes to -o).
// REPORT-LABEL: oasr plan: model 'mlp3', strategy wfbp, 3 groups
// REPORT-NEXT: comm: alpha=9.750e-05 s beta=3.060e-10 s/B

// The profile's 97.5 us start-up keeps one group per layer; 2000 us more
// per group makes one group after backward the better plan.
// NOOVER: oasr.plan = {{{.*}}group_overhead_us = 0.000000e+00 : f64, groups = 3 : i64
// OVER: oasr.plan = {{{.*}}group_overhead_us = 2.000000e+03 : f64, groups = 1 : i64
// OVER-COMMON-LABEL: func.func @train_step
// OVER-COMMON: %[[G3:.*]]:3 = oasr.node "GemmGrad"{{.*}}oasr.layer = "/fc3/Gemm"
// NOOVER-NEXT: oasr.allreduce_start %[[G3]]#1, %[[G3]]#2 {buffer_bytes = 20736 : i64, group = 0 : i64
// OVER-NOT: oasr.allreduce_start
// OVER-COMMON: %[[G1:.*]]:3 = oasr.node "GemmGrad"{{.*}}oasr.layer = "/fc1/Gemm"
// NOOVER-NEXT: oasr.allreduce_start %[[G1]]#1, %[[G1]]#2 {buffer_bytes = 526336 : i64, group = 2 : i64
// OVER-NEXT: oasr.allreduce_start %[[G3]]#1, %[[G3]]#2, %{{.*}}#1, %{{.*}}#2, %[[G1]]#1, %[[G1]]#2 {buffer_bytes = 1597696 : i64, group = 0 : i64
// OVER-NOT: oasr.allreduce_start

// BAD: error: unknown strategy 'nope'
// BAD-OVER: error: 'group-overhead-us' must be >= 0
