// RUN: oasr-opt %s --oasr-autocast=precision=fp8 -split-input-file -verify-diagnostics

// expected-error @+1 {{unknown precision 'fp8': expected f32, tf32, bf16 or f16}}
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    return %x : tensor<2x4xf32>
  }
}
