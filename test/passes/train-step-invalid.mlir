// RUN: oasr-opt %s --oasr-annotate-cost -split-input-file -verify-diagnostics
// The @train_step checks shared by the passes after autodiff (TrainStep.cpp),
// here through --oasr-annotate-cost.

module {
  // expected-error @+1 {{@train_step must have exactly one block}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %ga : tensor<f32>, tensor<4xf32>
  ^bb1:
    return %l, %ga : tensor<f32>, tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{parameter 'b' has no gradient in @train_step}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"},
                        %b: tensor<4xf32> {oasr.param = "b"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %ga : tensor<f32>, tensor<4xf32>
  }
}

// -----

// The gradient is a forward node's result (no oasr.layer).
module {
  // expected-error @+1 {{the gradient of 'a' is not made by a backward node}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %ga : tensor<f32>, tensor<4xf32>
  }
}

// -----

// A block argument is not made by a backward node either.
module {
  // expected-error @+1 {{the gradient of 'a' is not made by a backward node}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    return %l, %a : tensor<f32>, tensor<4xf32>
  }
}
