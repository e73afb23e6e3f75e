// Option errors (no step needed).
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-plan-report=format=xml -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce --oasr-plan-report=output=%t.missing-dir/report.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=OUTPUT
// FORMAT: error: unknown report format 'xml' (expected 'text' or 'json')
// OUTPUT: error: cannot write the plan report: cannot open output file '{{.*}}missing-dir/report.txt'

// Errors on the step.
// RUN: oasr-opt %s --oasr-plan-report -split-input-file -verify-diagnostics

// expected-error @+1 {{--oasr-plan-report needs a 'func.func @train_step' (run --oasr-autodiff first)}}
module {
}

// -----

// expected-error @+1 {{no 'oasr.plan': run --oasr-plan-allreduce first}}
module {
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %ga : tensor<f32>, tensor<4xf32>
  }
}

// -----

// The groups must be contiguous in ready order: here group 0 holds the
// gradient ready last.
module attributes {oasr.plan = {alpha_s = 1.0e-6 : f64, beta_s_per_byte = 1.0e-12 : f64, strategy = "edited"}} {
  // expected-error @+1 {{the allreduce groups are not a plan: plan 'edited': group 1 is empty or out of order}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"},
                        %b: tensor<4xf32> {oasr.param = "b"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"},
          tensor<4xf32> {oasr.grad = "b"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %gb = oasr.node "Neg"(%b) {oasr.layer = "/b"} : (tensor<4xf32>) -> tensor<4xf32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    %t0 = oasr.allreduce_start %ga {group = 0 : i64} : tensor<4xf32>
    %t1 = oasr.allreduce_start %gb {group = 1 : i64} : tensor<4xf32>
    %r0 = oasr.allreduce_wait %t0 : tensor<4xf32>
    %r1 = oasr.allreduce_wait %t1 : tensor<4xf32>
    return %l, %r0, %r1 : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// A gradient in no group.
module attributes {oasr.plan = {alpha_s = 1.0e-6 : f64, beta_s_per_byte = 1.0e-12 : f64, strategy = "edited"}} {
  // expected-error @+1 {{the allreduce groups are not a plan: plan 'edited' covers 1 gradients, the profile has 2}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"},
                        %b: tensor<4xf32> {oasr.param = "b"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"},
          tensor<4xf32> {oasr.grad = "b"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %gb = oasr.node "Neg"(%b) {oasr.layer = "/b"} : (tensor<4xf32>) -> tensor<4xf32>
    %t0 = oasr.allreduce_start %gb {group = 0 : i64} : tensor<4xf32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    %r0 = oasr.allreduce_wait %t0 : tensor<4xf32>
    return %l, %ga, %r0 : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}
