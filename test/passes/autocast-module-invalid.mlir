// RUN: oasr-opt %s --oasr-autocast=precision=f16 -split-input-file -verify-diagnostics

// A module already autocast to another precision.
// expected-error @+1 {{module is already in precision 'bf16', cannot change it to 'f16'}}
module attributes {oasr.precision = "bf16"} {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    return %x : tensor<2x4xf32>
  }
}

// -----

// A training step without the forward graph (an imported ONNX Runtime
// training model, or autocast after autodiff).
// expected-error @+1 {{precision 'f16' needs the imported '@forward' graph: run oasr-autocast before oasr-autodiff}}
module {
  func.func @train_step(%x: tensor<2x4xf32> {oasr.input = "x"})
      -> (tensor<2x4xf32>) {
    return %x : tensor<2x4xf32>
  }
}
