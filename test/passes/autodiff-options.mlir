// RUN: oasr-opt %s --oasr-autodiff -split-input-file | FileCheck %s --check-prefix=DEFAULT
// RUN: oasr-opt %s --oasr-autodiff="output=aux loss=xent label=target" -split-input-file | FileCheck %s --check-prefix=NAMED
// Errors of these options: autodiff-options-invalid.mlir.

// Default: the first float output (logits) gets the loss, named "loss",
// with a "label" argument; the other output's Relu is dropped. Named: the
// loss goes on "aux", and the loss and label take the given names.

// DEFAULT-LABEL: func.func @train_step
// DEFAULT-SAME: tensor<2xi64> {oasr.label = "label"}
// DEFAULT-SAME: -> (tensor<f32> {oasr.output = "loss"}
// DEFAULT: %[[Y:.*]] = oasr.node "Gemm"
// DEFAULT-NEXT: oasr.node "SoftmaxCrossEntropyLoss"(%[[Y]], %{{.*}})
// DEFAULT-NOT: "Relu"

// NAMED-LABEL: func.func @train_step
// NAMED-SAME: tensor<2xi64> {oasr.label = "target"}
// NAMED-SAME: -> (tensor<f32> {oasr.output = "xent"}
// NAMED: %[[A:.*]] = oasr.node "Relu"
// NAMED-NEXT: oasr.node "SoftmaxCrossEntropyLoss"(%[[A]], %{{.*}})
// NAMED: oasr.node "ReluGrad"
// NAMED: oasr.node "GemmGrad"
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<3x4xf32> {oasr.param = "w"})
      -> (tensor<2x3xf32> {oasr.output = "logits"}, tensor<2x3xf32> {oasr.output = "aux"}) {
    %y = oasr.node "Gemm"(%x, %w) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %a = oasr.node "Relu"(%y) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %y, %a : tensor<2x3xf32>, tensor<2x3xf32>
  }
}

// -----

// A scalar output is the model's loss: no loss node and no label are added.
// By default the first scalar output is taken ("main"); output=aux takes
// the other; loss= still names the result. The unused output is dropped.
// DEFAULT-LABEL: func.func @train_step
// DEFAULT-NOT: oasr.label
// DEFAULT-SAME: -> (tensor<f32> {oasr.output = "loss"}, tensor<3xf32> {oasr.grad = "w"})
// DEFAULT: %[[L:.*]] = oasr.node "ReduceMean"
// DEFAULT-NOT: "ReduceMean"
// DEFAULT-NOT: SoftmaxCrossEntropyLoss
// DEFAULT: oasr.node "Expand"(%{{.*}}, %{{.*}}) {oasr.layer = "/main"}
// DEFAULT: return %[[L]], %{{.*}} : tensor<f32>, tensor<3xf32>
// NAMED-LABEL: func.func @train_step
// NAMED-NOT: oasr.label
// NAMED-SAME: -> (tensor<f32> {oasr.output = "xent"}, tensor<3xf32> {oasr.grad = "w"})
// NAMED: %[[L:.*]] = oasr.node "ReduceMean"
// NAMED-NOT: "ReduceMean"
// NAMED: oasr.node "Expand"(%{{.*}}, %{{.*}}) {oasr.layer = "/aux"}
// NAMED: return %[[L]], %{{.*}} : tensor<f32>, tensor<3xf32>
module {
  func.func @forward(%x: tensor<3xf32> {oasr.input = "x"},
                     %w: tensor<3xf32> {oasr.param = "w"})
      -> (tensor<f32> {oasr.output = "main"}, tensor<f32> {oasr.output = "aux"}) {
    %m = oasr.node "Mul"(%x, %w) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %l = oasr.node "ReduceMean"(%m) {keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32> loc("/main")
    %a = oasr.node "ReduceMean"(%m) {keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32> loc("/aux")
    return %l, %a : tensor<f32>, tensor<f32>
  }
}
