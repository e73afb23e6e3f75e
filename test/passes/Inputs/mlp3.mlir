// A three-layer MLP as the importer produces it (docs/IR.md section 1).
module attributes {oasr.model = "mlp3", oasr.opset = 17 : i64} {
  func.func @forward(%x: tensor<32x256xf32> {oasr.input = "input"},
                     %w1: tensor<512x256xf32> {oasr.param = "fc1.weight"},
                     %b1: tensor<512xf32> {oasr.param = "fc1.bias"},
                     %w2: tensor<512x512xf32> {oasr.param = "fc2.weight"},
                     %b2: tensor<512xf32> {oasr.param = "fc2.bias"},
                     %w3: tensor<10x512xf32> {oasr.param = "fc3.weight"},
                     %b3: tensor<10xf32> {oasr.param = "fc3.bias"})
      -> (tensor<32x10xf32> {oasr.output = "logits"}) {
    %h1 = oasr.node "Gemm"(%x, %w1, %b1) {transB = 1 : i64} : (tensor<32x256xf32>, tensor<512x256xf32>, tensor<512xf32>) -> tensor<32x512xf32> loc("/fc1/Gemm")
    %r1 = oasr.node "Relu"(%h1) : (tensor<32x512xf32>) -> tensor<32x512xf32> loc("/relu1/Relu")
    %h2 = oasr.node "Gemm"(%r1, %w2, %b2) {transB = 1 : i64} : (tensor<32x512xf32>, tensor<512x512xf32>, tensor<512xf32>) -> tensor<32x512xf32> loc("/fc2/Gemm")
    %r2 = oasr.node "Relu"(%h2) : (tensor<32x512xf32>) -> tensor<32x512xf32> loc("/relu2/Relu")
    %y = oasr.node "Gemm"(%r2, %w3, %b3) {transB = 1 : i64} : (tensor<32x512xf32>, tensor<10x512xf32>, tensor<10xf32>) -> tensor<32x10xf32> loc("/fc3/Gemm")
    return %y : tensor<32x10xf32>
  }
}
