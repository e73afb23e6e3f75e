// RUN: oasr-opt %s --oasr-fuse-matmul-transpose | FileCheck %s

// A Transpose of other axes, or one read elsewhere too, stays.
// CHECK-LABEL: func.func @forward
// CHECK: %[[T:.*]] = oasr.node "Transpose"
// CHECK: oasr.node "MatMul"(%[[T]]
// CHECK: %[[U:.*]] = oasr.node "Transpose"
// CHECK: oasr.node "com.microsoft"::"FusedMatMul"(%{{.*}}, %{{.*}}) {transA = 1 : i64, transB = 0 : i64}
// CHECK: return %{{.*}}, %[[U]]
module {
  func.func @forward(%x: tensor<2x3x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<3x2x4xf32> {oasr.output = "logits"}, tensor<2x4x3xf32> {oasr.output = "u"}) {
    %t = oasr.node "Transpose"(%x) {perm = [1, 0, 2]} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
    %m = oasr.node "MatMul"(%t, %w) : (tensor<3x2x4xf32>, tensor<4x4xf32>) -> tensor<3x2x4xf32>
    %u = oasr.node "Transpose"(%x) {perm = [0, 2, 1]} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
    %v = oasr.node "MatMul"(%u, %x) : (tensor<2x4x3xf32>, tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
    return %m, %u : tensor<3x2x4xf32>, tensor<2x4x3xf32>
  }
}
