// RUN: oasr-opt %s --oasr-annotate-cost=profile=%S/Inputs/ab.profile.json -split-input-file -verify-diagnostics
// Diagnostics of --oasr-annotate-cost on a step; option errors are in
// annotate-cost-profile.mlir.

// expected-error @+1 {{--oasr-annotate-cost needs a 'func.func @train_step' (run --oasr-autodiff first)}}
module {
}

// -----

// The profile says 8 bytes for 'a'; the step's gradient has 16.
module {
  // expected-warning @+1 {{profile gives 8 bytes for 'a', the step has 16}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"},
                        %b: tensor<4xf32> {oasr.param = "b"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"},
          tensor<4xf32> {oasr.grad = "b"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %gb = oasr.node "Neg"(%b) {oasr.layer = "/b"} : (tensor<4xf32>) -> tensor<4xf32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %ga, %gb : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// Names on either side without a match are reported, with the step layer
// costed 0.
module {
  // expected-warning @+2 {{profile layers with no match in the step: a}}
  // expected-warning @+1 {{step layers with no match in the profile (cost 0): /c}}
  func.func @train_step(%b: tensor<4xf32> {oasr.param = "b"},
                        %c: tensor<4xf32> {oasr.param = "c"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "b"},
          tensor<4xf32> {oasr.grad = "c"}) {
    %l = oasr.node "ReduceMean"(%b) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %gc = oasr.node "Neg"(%c) {oasr.layer = "/c"} : (tensor<4xf32>) -> tensor<4xf32>
    %gb = oasr.node "Neg"(%b) {oasr.layer = "/b"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %gb, %gc : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}
