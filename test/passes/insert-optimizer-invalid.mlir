// RUN: oasr-opt %s --oasr-insert-optimizer -split-input-file -verify-diagnostics
// Options are spelled kebab-case, as MLIR's own: the snake_case spellings
// of weight-decay and lr-decay are gone.
// RUN: not oasr-opt %s --oasr-insert-optimizer="weight_decay=1e-4" 2>&1 | FileCheck %s --check-prefix=SNAKE
// RUN: not oasr-opt %s --oasr-insert-optimizer="lr_decay=0.1" 2>&1 | FileCheck %s --check-prefix=SNAKE
// SNAKE: no such option {{weight_decay|lr_decay}}

module {
  // expected-error @+1 {{@train_step already has optimizer updates}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.new_param = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    %na = oasr.optimizer_update "sgd" %a, %ga {lr = 1.000000e-02 : f64} : tensor<4xf32>
    return %l, %na : tensor<f32>, tensor<4xf32>
  }
}

// -----

// A returned gradient must belong to an oasr.param argument.
module {
  // expected-error @+1 {{gradient 'b' has no 'oasr.param' argument}}
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "b"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %ga : tensor<f32>, tensor<4xf32>
  }
}
