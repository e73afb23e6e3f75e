// RUN: oasr-opt %s --oasr-autodiff | FileCheck %s --check-prefix=DEFAULT
// RUN: oasr-opt %s --oasr-autodiff="output=aux loss=xent label=target" | FileCheck %s --check-prefix=NAMED
// RUN: not oasr-opt %s --oasr-autodiff="output=nope" 2>&1 | FileCheck %s --check-prefix=MISSING

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

// MISSING: error: no output named 'nope'
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<3x4xf32> {oasr.param = "w"})
      -> (tensor<2x3xf32> {oasr.output = "logits"}, tensor<2x3xf32> {oasr.output = "aux"}) {
    %y = oasr.node "Gemm"(%x, %w) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %a = oasr.node "Relu"(%y) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %y, %a : tensor<2x3xf32>, tensor<2x3xf32>
  }
}
