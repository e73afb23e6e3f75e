// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="device=h100 alpha=9.75e-5 beta=3.06e-10 algo=momentum lr=0.1" | FileCheck %s
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="device=h100 alpha=9.75e-5 beta=3.06e-10 algo=momentum lr=0.1" -o %t.mlir
// RUN: %python %S/Inputs/check_step.py %t.mlir | FileCheck %s --check-prefix=STRUCT
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="profile=%S/Inputs/mlp3.profile.json strategy=wfbp report=true" -o %t.wfbp.mlir | FileCheck %s --check-prefix=REPORT
// RUN: %python %S/Inputs/check_step.py %t.wfbp.mlir | FileCheck %s --check-prefix=STRUCT-WFBP
// RUN: oasr-opt %S/Inputs/autodiff-cnn.mlir --oasr-train-pipeline="device=v100 strategy=mgwfbp alpha=2.36e-4 beta=4.06e-10" -o %t.cnn.mlir
// RUN: %python %S/Inputs/check_step.py %t.cnn.mlir | FileCheck %s --check-prefix=STRUCT-CNN
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-train-pipeline="strategy=nope alpha=1e-4 beta=1e-9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

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
// REPORT: oasr plan: model 'mlp3', strategy wfbp, 3 groups
// BAD: error: unknown strategy
