// RUN: oasr-opt %s --oasr-autodiff=output=y -split-input-file -verify-diagnostics

module {
  // expected-error @+1 {{no output named 'y'}}
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    return %x : tensor<2x4xf32>
  }
}

// -----

// The named output is an integer tensor.
module {
  // expected-error @+1 {{output #1 'y' (tensor<2xi64>) is not a float tensor to train on}}
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}, tensor<2xi64> {oasr.output = "y"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a = oasr.node "ArgMax"(%m) {axis = 1 : i64, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<2xi64>
    return %m, %a : tensor<2x4xf32>, tensor<2xi64>
  }
}
