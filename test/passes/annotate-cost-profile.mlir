// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json | FileCheck %s
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/partial.profile.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARTIAL
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/does-not-exist.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=tpu -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-annotate-cost -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOSTEP

// Measured times: the profile's comm and update time are kept for planning;
// each layer's backward_us is spread over its backward nodes (the loss
// gradient folds into the last layer, fc3), forward_us over forward nodes.
// CHECK: oasr.cost_model = {alpha_s = 9.750000e-05 : f64, beta_s_per_byte = 3.060000e-10 : f64, file = "{{.*}}mlp3.profile.json", overlap_rate = 1.000000e+00 : f64, ranks = 8 : i64, source = "profile", update_us = 0.000000e+00 : f64}
// CHECK-LABEL: func.func @train_step
// CHECK: oasr.node "SoftmaxCrossEntropyLossGrad"{{.*}}#oasr.cost<backward_us = [[A:[0-9.eE+-]+]]
// CHECK: oasr.node "GemmGrad"{{.*}}#oasr.cost<backward_us = [[B:[0-9.eE+-]+]]{{.*}}oasr.layer = "/fc3/Gemm"
// CHECK: oasr.node "ReluGrad"{{.*}}#oasr.cost<backward_us = {{.*}}oasr.layer = "/relu2/Relu"
// CHECK: oasr.node "GemmGrad"{{.*}}oasr.layer = "/fc2/Gemm"

// PARTIAL: warning: profile layers with no match in the step: conv9
// PARTIAL: warning: step layers with no match in the profile (cost 0): /fc2/Gemm, /fc3/Gemm

// MISSING: error: cannot read profile: {{.*}}does-not-exist.json

// DEVICE: error: unknown device 'tpu' (known: cpu, h100, h200, v100, k80)

// NOSTEP: error: --oasr-annotate-cost needs a 'func.func @train_step' (run --oasr-autodiff first)

// Diagnostics on hand-written steps (profile bytes that disagree, names
// without a match): annotate-cost-invalid.mlir.
