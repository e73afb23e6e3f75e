// RUN: oasr-opt %s --oasr-autodiff -split-input-file | FileCheck %s

// An MLP: the loss is appended, Gemm gets GemmGrad, Relu gets ReluGrad.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x64xf32> {oasr.input = "input"}
// CHECK-SAME: %[[L:[^:]*]]: tensor<8xi64> {oasr.label = "label"}
// CHECK-SAME: %[[W1:[^:]*]]: tensor<32x64xf32> {oasr.param = "fc1.weight"}
// CHECK-SAME: %[[B1:[^:]*]]: tensor<32xf32> {oasr.param = "fc1.bias"}
// CHECK-SAME: %[[W2:[^:]*]]: tensor<10x32xf32> {oasr.param = "fc2.weight"}
// CHECK-SAME: %[[B2:[^:]*]]: tensor<10xf32> {oasr.param = "fc2.bias"}
// CHECK-SAME: -> (tensor<f32> {oasr.output = "loss"}, tensor<32x64xf32> {oasr.grad = "fc1.weight"}, tensor<32xf32> {oasr.grad = "fc1.bias"}, tensor<10x32xf32> {oasr.grad = "fc2.weight"}, tensor<10xf32> {oasr.grad = "fc2.bias"})
// CHECK: %[[H:.*]] = oasr.node "Gemm"(%[[X]], %[[W1]], %[[B1]])
// CHECK-NEXT: %[[R:.*]] = oasr.node "Relu"(%[[H]])
// CHECK-NEXT: %[[Y:.*]] = oasr.node "Gemm"(%[[R]], %[[W2]], %[[B2]])
// CHECK-NEXT: %[[LOSS:.*]]:2 = oasr.node "SoftmaxCrossEntropyLoss"(%[[Y]], %[[L]]) {reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x10xf32>)
// CHECK-NEXT: %[[ONE:.*]] = oasr.node "Constant"() {oasr.layer = "loss", value = dense<1.000000e+00> : tensor<f32>}
// CHECK-NEXT: %[[DY:.*]] = oasr.node "SoftmaxCrossEntropyLossGrad"(%[[ONE]], %[[LOSS]]#1, %[[L]]) {oasr.layer = "loss", reduction = "mean"}
// CHECK-NEXT: %[[G2:.*]]:3 = oasr.node "GemmGrad"(%[[DY]], %[[R]], %[[W2]]) {oasr.layer = "/fc2/Gemm", transB = 1 : i64}
// CHECK-NEXT: %[[DH:.*]] = oasr.node "ReluGrad"(%[[G2]]#0, %[[R]]) {oasr.layer = "/relu/Relu"}
// CHECK-NEXT: %[[G1:.*]]:3 = oasr.node "GemmGrad"(%[[DH]], %[[X]], %[[W1]]) {oasr.layer = "/fc1/Gemm", transB = 1 : i64}
// CHECK-NEXT: return %[[LOSS]]#0, %[[G1]]#1, %[[G1]]#2, %[[G2]]#1, %[[G2]]#2
// CHECK-NOT: @forward
module {
  func.func @forward(%x: tensor<8x64xf32> {oasr.input = "input"},
                     %w1: tensor<32x64xf32> {oasr.param = "fc1.weight"},
                     %b1: tensor<32xf32> {oasr.param = "fc1.bias"},
                     %w2: tensor<10x32xf32> {oasr.param = "fc2.weight"},
                     %b2: tensor<10xf32> {oasr.param = "fc2.bias"})
      -> (tensor<8x10xf32> {oasr.output = "logits"}) {
    %h = oasr.node "Gemm"(%x, %w1, %b1) {transB = 1 : i64} : (tensor<8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<8x32xf32> loc("/fc1/Gemm")
    %r = oasr.node "Relu"(%h) : (tensor<8x32xf32>) -> tensor<8x32xf32> loc("/relu/Relu")
    %y = oasr.node "Gemm"(%r, %w2, %b2) {transB = 1 : i64} : (tensor<8x32xf32>, tensor<10x32xf32>, tensor<10xf32>) -> tensor<8x10xf32> loc("/fc2/Gemm")
    return %y : tensor<8x10xf32>
  }
}

// -----

// A residual CNN block: BN gets its training form and new running
// statistics, MaxPool its Indices; the fan-out of %p sums two gradients.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[RM:[^:]*]]: tensor<4xf32> {oasr.state = "bn.running_mean"}
// CHECK-SAME: %[[RV:[^:]*]]: tensor<4xf32> {oasr.state = "bn.running_var"}
// CHECK-SAME: -> (tensor<f32> {oasr.output = "loss"}, tensor<4x3x3x3xf32> {oasr.grad = "conv.weight"}, tensor<4xf32> {oasr.grad = "bn.weight"}, tensor<4xf32> {oasr.grad = "bn.bias"}, tensor<10x64xf32> {oasr.grad = "fc.weight"}, tensor<10xf32> {oasr.grad = "fc.bias"}, tensor<4xf32> {oasr.new_state = "bn.running_mean"}, tensor<4xf32> {oasr.new_state = "bn.running_var"})
// CHECK: %[[C:.*]] = oasr.node "Conv"
// CHECK-NEXT: %[[BN:.*]]:5 = oasr.node "BatchNormalization"(%[[C]], %{{.*}}, %{{.*}}, %[[RM]], %[[RV]]) {epsilon = 9.99999974E-6 : f32, momentum = 0.899999976 : f32, training_mode = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: %[[R:.*]] = oasr.node "Relu"(%[[BN]]#0)
// CHECK-NEXT: %[[P:.*]]:2 = oasr.node "MaxPool"(%[[R]]) {kernel_shape = [2, 2], strides = [2, 2]} : (tensor<2x4x8x8xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x4x4x4xi64>)
// CHECK-NEXT: %[[S:.*]] = oasr.node "Add"(%[[P]]#0, %[[P]]#0)
// CHECK: %[[FL:.*]] = oasr.node "Flatten"(%[[S]])
// CHECK: %[[GG:.*]]:3 = oasr.node "GemmGrad"
// CHECK-NEXT: %[[SH:.*]] = oasr.node "Constant"() {oasr.layer = "/flatten/Flatten", value = dense<[2, 4, 4, 4]> : tensor<4xi64>}
// CHECK-NEXT: %[[DF:.*]] = oasr.node "Reshape"(%[[GG]]#0, %[[SH]]) {oasr.layer = "/flatten/Flatten"} : (tensor<2x64xf32>, tensor<4xi64>) -> tensor<2x4x4x4xf32>
// The Add's two operand gradients are both dY; they are summed for %P.
// CHECK-NEXT: %[[DP:.*]] = oasr.node "Add"(%[[DF]], %[[DF]]) {oasr.layer = "/pool/MaxPool"}
// CHECK-NEXT: %[[DR:.*]] = oasr.node "MaxPoolGrad"(%[[DP]], %[[P]]#1) {kernel_shape = [2, 2], oasr.layer = "/pool/MaxPool", strides = [2, 2]}
// CHECK-NEXT: %[[DB:.*]] = oasr.node "ReluGrad"(%[[DR]], %[[R]])
// CHECK-NEXT: %[[BG:.*]]:3 = oasr.node "BatchNormalizationGrad"(%[[DB]], %[[C]], %{{.*}}, %[[BN]]#3, %[[BN]]#4) {epsilon = 9.99999974E-6 : f32, oasr.layer = "/bn/BatchNormalization"}
// CHECK-NEXT: %[[CG:.*]]:2 = oasr.node "ConvGrad"(%[[BG]]#0, %{{.*}}, %{{.*}}) {oasr.layer = "/conv/Conv", pads = [1, 1, 1, 1]} : (tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>)
// CHECK-NEXT: return %{{.*}}, %[[CG]]#1, %[[BG]]#1, %[[BG]]#2, %[[GG]]#1, %[[GG]]#2, %[[BN]]#1, %[[BN]]#2
module {
  func.func @forward(%x: tensor<2x3x8x8xf32> {oasr.input = "input"},
                     %w: tensor<4x3x3x3xf32> {oasr.param = "conv.weight"},
                     %s: tensor<4xf32> {oasr.param = "bn.weight"},
                     %b: tensor<4xf32> {oasr.param = "bn.bias"},
                     %fw: tensor<10x64xf32> {oasr.param = "fc.weight"},
                     %fb: tensor<10xf32> {oasr.param = "fc.bias"},
                     %rm: tensor<4xf32> {oasr.state = "bn.running_mean"},
                     %rv: tensor<4xf32> {oasr.state = "bn.running_var"})
      -> (tensor<2x10xf32> {oasr.output = "logits"}) {
    %c = oasr.node "Conv"(%x, %w) {pads = [1, 1, 1, 1]} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> loc("/conv/Conv")
    %n = oasr.node "BatchNormalization"(%c, %s, %b, %rm, %rv) {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32> loc("/bn/BatchNormalization")
    %r = oasr.node "Relu"(%n) : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> loc("/relu/Relu")
    %p = oasr.node "MaxPool"(%r) {kernel_shape = [2, 2], strides = [2, 2]} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32> loc("/pool/MaxPool")
    %a = oasr.node "Add"(%p, %p) : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32> loc("/add/Add")
    %f = oasr.node "Flatten"(%a) {axis = 1 : i64} : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32> loc("/flatten/Flatten")
    %y = oasr.node "Gemm"(%f, %fw, %fb) {transB = 1 : i64} : (tensor<2x64xf32>, tensor<10x64xf32>, tensor<10xf32>) -> tensor<2x10xf32> loc("/fc/Gemm")
    return %y : tensor<2x10xf32>
  }
}

// -----

// A training step imported from ONNX Runtime (oasr.step_source, no @forward)
// is already differentiated: autodiff leaves it as it is.
// CHECK-LABEL: module attributes {oasr.step_source = "onnxruntime-training"}
// CHECK: func.func @train_step(%[[W:.*]]: tensor<4xf32> {oasr.param = "w"}) -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "w"})
// CHECK-NEXT: %[[L:.*]] = oasr.node "ReduceSum"(%[[W]])
// CHECK-NEXT: %[[G:.*]] = oasr.node "Identity"(%[[W]]) {oasr.layer = "sum"}
// CHECK-NEXT: return %[[L]], %[[G]]
module attributes {oasr.step_source = "onnxruntime-training"} {
  func.func @train_step(%w: tensor<4xf32> {oasr.param = "w"}) -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "w"}) {
    %l = oasr.node "ReduceSum"(%w) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %g = oasr.node "Identity"(%w) {oasr.layer = "sum"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %g : tensor<f32>, tensor<4xf32>
  }
}
