// An eight-layer MLP (145 MB of gradients) on which the merge strategies
// give different groups; see plan-matches-oasr-plan.test.
module attributes {oasr.model = "mlp8", oasr.opset = 17 : i64} {
  func.func @forward(%x: tensor<32x1024xf32> {oasr.input = "input"},
                     %w1: tensor<4096x1024xf32> {oasr.param = "fc1.weight"},
                     %b1: tensor<4096xf32> {oasr.param = "fc1.bias"},
                     %w2: tensor<4096x4096xf32> {oasr.param = "fc2.weight"},
                     %b2: tensor<4096xf32> {oasr.param = "fc2.bias"},
                     %w3: tensor<2048x4096xf32> {oasr.param = "fc3.weight"},
                     %b3: tensor<2048xf32> {oasr.param = "fc3.bias"},
                     %w4: tensor<2048x2048xf32> {oasr.param = "fc4.weight"},
                     %b4: tensor<2048xf32> {oasr.param = "fc4.bias"},
                     %w5: tensor<1024x2048xf32> {oasr.param = "fc5.weight"},
                     %b5: tensor<1024xf32> {oasr.param = "fc5.bias"},
                     %w6: tensor<512x1024xf32> {oasr.param = "fc6.weight"},
                     %b6: tensor<512xf32> {oasr.param = "fc6.bias"},
                     %w7: tensor<256x512xf32> {oasr.param = "fc7.weight"},
                     %b7: tensor<256xf32> {oasr.param = "fc7.bias"},
                     %w8: tensor<10x256xf32> {oasr.param = "fc8.weight"},
                     %b8: tensor<10xf32> {oasr.param = "fc8.bias"})
      -> (tensor<32x10xf32> {oasr.output = "logits"}) {
    %h1 = oasr.node "Gemm"(%x, %w1, %b1) {transB = 1 : i64} : (tensor<32x1024xf32>, tensor<4096x1024xf32>, tensor<4096xf32>) -> tensor<32x4096xf32> loc("/fc1/Gemm")
    %r1 = oasr.node "Relu"(%h1) : (tensor<32x4096xf32>) -> tensor<32x4096xf32> loc("/relu1/Relu")
    %h2 = oasr.node "Gemm"(%r1, %w2, %b2) {transB = 1 : i64} : (tensor<32x4096xf32>, tensor<4096x4096xf32>, tensor<4096xf32>) -> tensor<32x4096xf32> loc("/fc2/Gemm")
    %r2 = oasr.node "Relu"(%h2) : (tensor<32x4096xf32>) -> tensor<32x4096xf32> loc("/relu2/Relu")
    %h3 = oasr.node "Gemm"(%r2, %w3, %b3) {transB = 1 : i64} : (tensor<32x4096xf32>, tensor<2048x4096xf32>, tensor<2048xf32>) -> tensor<32x2048xf32> loc("/fc3/Gemm")
    %r3 = oasr.node "Relu"(%h3) : (tensor<32x2048xf32>) -> tensor<32x2048xf32> loc("/relu3/Relu")
    %h4 = oasr.node "Gemm"(%r3, %w4, %b4) {transB = 1 : i64} : (tensor<32x2048xf32>, tensor<2048x2048xf32>, tensor<2048xf32>) -> tensor<32x2048xf32> loc("/fc4/Gemm")
    %r4 = oasr.node "Relu"(%h4) : (tensor<32x2048xf32>) -> tensor<32x2048xf32> loc("/relu4/Relu")
    %h5 = oasr.node "Gemm"(%r4, %w5, %b5) {transB = 1 : i64} : (tensor<32x2048xf32>, tensor<1024x2048xf32>, tensor<1024xf32>) -> tensor<32x1024xf32> loc("/fc5/Gemm")
    %r5 = oasr.node "Relu"(%h5) : (tensor<32x1024xf32>) -> tensor<32x1024xf32> loc("/relu5/Relu")
    %h6 = oasr.node "Gemm"(%r5, %w6, %b6) {transB = 1 : i64} : (tensor<32x1024xf32>, tensor<512x1024xf32>, tensor<512xf32>) -> tensor<32x512xf32> loc("/fc6/Gemm")
    %r6 = oasr.node "Relu"(%h6) : (tensor<32x512xf32>) -> tensor<32x512xf32> loc("/relu6/Relu")
    %h7 = oasr.node "Gemm"(%r6, %w7, %b7) {transB = 1 : i64} : (tensor<32x512xf32>, tensor<256x512xf32>, tensor<256xf32>) -> tensor<32x256xf32> loc("/fc7/Gemm")
    %r7 = oasr.node "Relu"(%h7) : (tensor<32x256xf32>) -> tensor<32x256xf32> loc("/relu7/Relu")
    %h8 = oasr.node "Gemm"(%r7, %w8, %b8) {transB = 1 : i64} : (tensor<32x256xf32>, tensor<10x256xf32>, tensor<10xf32>) -> tensor<32x10xf32> loc("/fc8/Gemm")
    return %h8 : tensor<32x10xf32>
  }
}
