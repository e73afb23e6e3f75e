// RUN: oasr-opt %s --oasr-fuse-casts -split-input-file | FileCheck %s

// A product read only by a widening Cast writes f32 itself.
// CHECK-LABEL: func.func @forward
// CHECK: %[[M:.*]] = oasr.node "MatMul"({{.*}}) : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xf32>
// CHECK-NOT: "Cast"
// CHECK: return %[[M]]
module {
  func.func @forward(%x: tensor<2x4xbf16> {oasr.input = "x"},
                     %w: tensor<4x4xbf16> {oasr.param = "w"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %c = oasr.node "Cast"(%m) {to = 1 : i64} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
    return %c : tensor<2x4xf32>
  }
}

// -----

// A product read elsewhere too, or one without f32 results (Conv), keeps
// its type and the Cast.
// CHECK-LABEL: func.func @forward
// CHECK: oasr.node "MatMul"({{.*}}) -> tensor<2x4xbf16>
// CHECK: oasr.node "Cast"
// CHECK: oasr.node "Conv"({{.*}}) -> tensor<1x1x3x3xbf16>
// CHECK: oasr.node "Cast"
module {
  func.func @forward(%x: tensor<2x4xbf16> {oasr.input = "x"},
                     %w: tensor<4x4xbf16> {oasr.param = "w"},
                     %i: tensor<1x1x3x3xbf16> {oasr.input = "i"},
                     %k: tensor<1x1x1x1xbf16> {oasr.param = "k"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}, tensor<2x4xbf16> {oasr.output = "m"}, tensor<1x1x3x3xf32> {oasr.output = "c"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %c = oasr.node "Cast"(%m) {to = 1 : i64} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
    %v = oasr.node "Conv"(%i, %k) : (tensor<1x1x3x3xbf16>, tensor<1x1x1x1xbf16>) -> tensor<1x1x3x3xbf16>
    %vc = oasr.node "Cast"(%v) {to = 1 : i64} : (tensor<1x1x3x3xbf16>) -> tensor<1x1x3x3xf32>
    return %c, %m, %vc : tensor<2x4xf32>, tensor<2x4xbf16>, tensor<1x1x3x3xf32>
  }
}
