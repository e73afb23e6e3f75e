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
