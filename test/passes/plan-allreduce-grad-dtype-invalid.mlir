// grad-dtype converts f32 gradients: a step with an f16 gradient is refused,
// naming the gradient, before anything is rewritten.
// RUN: oasr-opt %s --oasr-plan-allreduce="alpha=1e-4 beta=1e-9 grad-dtype=bf16" -verify-diagnostics
// The same step sends its f16 gradient as it is in f32 (the default).
// RUN: oasr-opt %s --oasr-plan-allreduce="alpha=1e-4 beta=1e-9" | FileCheck %s
// CHECK: oasr.allreduce_start %{{.*}} {group = 0 : i64} : tensor<4xf16>

// expected-error @+1 {{'grad-dtype=bf16' converts f32 gradients; gradient 'a' is 'tensor<4xf16>'}}
module {
  func.func @train_step(%a: tensor<4xf16> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf16> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64, oasr.cost = #oasr.cost<forward_us = 1.0>} : (tensor<4xf16>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.cost = #oasr.cost<backward_us = 1.0>, oasr.layer = "/a"} : (tensor<4xf16>) -> tensor<4xf16>
    return %l, %ga : tensor<f32>, tensor<4xf16>
  }
}
