// A planned training step of a two-layer MLP in the form the training
// pipeline produces (docs/IR.md section 3): forward, loss, backward, two fused
// allreduces placed where their last gradient is ready, and SGD updates after
// each group's wait.
module attributes {oasr.model = "mlp"} {
  func.func @train_step(%x: tensor<8x64xf32> {oasr.input = "input"},
                        %label: tensor<8xi64> {oasr.label = "label"},
                        %w1: tensor<32x64xf32> {oasr.param = "fc1.weight"},
                        %b1: tensor<32xf32> {oasr.param = "fc1.bias"},
                        %w2: tensor<10x32xf32> {oasr.param = "fc2.weight"},
                        %b2: tensor<10xf32> {oasr.param = "fc2.bias"})
      -> (tensor<f32>, tensor<32x64xf32>, tensor<32xf32>, tensor<10x32xf32>, tensor<10xf32>) {
    %h = oasr.node "Gemm"(%x, %w1, %b1) {transB = 1 : i64} : (tensor<8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<8x32xf32> loc("/fc1/Gemm")
    %r = oasr.node "Relu"(%h) : (tensor<8x32xf32>) -> tensor<8x32xf32> loc("/relu/Relu")
    %y = oasr.node "Gemm"(%r, %w2, %b2) {transB = 1 : i64} : (tensor<8x32xf32>, tensor<10x32xf32>, tensor<10xf32>) -> tensor<8x10xf32> loc("/fc2/Gemm")
    %loss, %logp = oasr.node "SoftmaxCrossEntropyLoss"(%y, %label) {reduction = "mean"} : (tensor<8x10xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x10xf32>) loc("/loss")
    %one = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %dy = oasr.node "SoftmaxCrossEntropyLossGrad"(%one, %logp, %label) {reduction = "mean", oasr.layer = "/loss"} : (tensor<f32>, tensor<8x10xf32>, tensor<8xi64>) -> tensor<8x10xf32>
    %dr, %dw2, %db2 = oasr.node "GemmGrad"(%dy, %r, %w2) {transB = 1 : i64, oasr.layer = "/fc2/Gemm", oasr.cost = #oasr.cost<backward_us = 12.0>} : (tensor<8x10xf32>, tensor<8x32xf32>, tensor<10x32xf32>) -> (tensor<8x32xf32>, tensor<10x32xf32>, tensor<10xf32>)
    %t0 = oasr.allreduce_start %dw2, %db2 {group = 0 : i64, offsets = array<i64: 0, 1280>, buffer_bytes = 1320 : i64} : tensor<10x32xf32>, tensor<10xf32>
    %dh = oasr.node "ReluGrad"(%dr, %r) {oasr.layer = "/relu/Relu"} : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %dx, %dw1, %db1 = oasr.node "GemmGrad"(%dh, %x, %w1) {transB = 1 : i64, oasr.layer = "/fc1/Gemm", oasr.cost = #oasr.cost<backward_us = 30.0>} : (tensor<8x32xf32>, tensor<8x64xf32>, tensor<32x64xf32>) -> (tensor<8x64xf32>, tensor<32x64xf32>, tensor<32xf32>)
    %t1 = oasr.allreduce_start %dw1, %db1 {group = 1 : i64, offsets = array<i64: 0, 8192>, buffer_bytes = 8320 : i64} : tensor<32x64xf32>, tensor<32xf32>
    %rw2, %rb2 = oasr.allreduce_wait %t0 : tensor<10x32xf32>, tensor<10xf32>
    %nw2 = oasr.optimizer_update "sgd" %w2, %rw2 {lr = 0.1 : f64} : tensor<10x32xf32>
    %nb2 = oasr.optimizer_update "sgd" %b2, %rb2 {lr = 0.1 : f64} : tensor<10xf32>
    %rw1, %rb1 = oasr.allreduce_wait %t1 : tensor<32x64xf32>, tensor<32xf32>
    %nw1 = oasr.optimizer_update "sgd" %w1, %rw1 {lr = 0.1 : f64} : tensor<32x64xf32>
    %nb1 = oasr.optimizer_update "sgd" %b1, %rb1 {lr = 0.1 : f64} : tensor<32xf32>
    return %loss, %nw1, %nb1, %nw2, %nb2 : tensor<f32>, tensor<32x64xf32>, tensor<32xf32>, tensor<10x32xf32>, tensor<10xf32>
  }
}
