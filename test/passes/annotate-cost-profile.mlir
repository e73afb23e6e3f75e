// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json | FileCheck %s
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/partial.profile.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARTIAL
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3-nograd.profile.json --oasr-plan-allreduce=strategy=wfbp --oasr-plan-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOGRAD --implicit-check-not=warning
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

// A profile that lists nodes without gradients as layers of their own (as
// oasr-run --profile does) has their backward time folded into the next
// layer with gradients in backward order: relu2's 300 us into fc2, relu1's
// 100 us into fc1, the same step as mlp3.profile.json (plan-report.mlir).
// NOGRAD: predicted iteration: 1727.550 us (forward 300.000, backward end 1450.000, comm end 1727.550, update 0.000)
// NOGRAD: 0      2        20520            -      350.000      350.000      453.779  /fc3/Gemm -> fc3.weight, fc3.bias
// NOGRAD: 1      2      1050624            -     1050.000     1050.000     1468.991  /fc2/Gemm -> fc2.weight, fc2.bias

// PARTIAL: warning: profile layers with no match in the step: conv9
// PARTIAL: warning: step layers with no match in the profile (cost 0): /fc2/Gemm, /fc3/Gemm

// MISSING: error: cannot read profile: {{.*}}does-not-exist.json

// DEVICE: error: unknown device 'tpu' (known: cpu, h100, h200, v100, k80)

// NOSTEP: error: --oasr-annotate-cost needs a 'func.func @train_step' (run --oasr-autodiff first)

// Diagnostics on hand-written steps (profile bytes that disagree, names
// without a match): annotate-cost-invalid.mlir.
