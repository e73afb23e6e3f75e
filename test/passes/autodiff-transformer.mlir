// RUN: oasr-opt %s --oasr-autodiff -split-input-file | FileCheck %s

// An attention-like block: Gather (embedding), LayerNormalization (training
// form with Mean/InvStdDev), batched MatMul, Transpose, Div, Softmax, Gelu via
// Erf, Sub, Pow, Sqrt, ReduceMean.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[LN:.*]]:3 = oasr.node "LayerNormalization"(%{{.*}}, %{{.*}}, %{{.*}}) {axis = -1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
// CHECK-DAG: oasr.node "SoftmaxGrad"(%{{.*}}, %{{.*}}) {axis = 2 : i64, oasr.layer = "/softmax"}
// CHECK-DAG: oasr.node "Exp"
// CHECK-DAG: oasr.node "Transpose"(%{{.*}}) {oasr.layer = "/kT", perm = [0, 2, 1]}
// CHECK-DAG: oasr.node "Neg"
// CHECK-DAG: oasr.node "Pow"
// CHECK-DAG: oasr.node "Expand"
// CHECK-DAG: oasr.node "LayerNormalizationGrad"(%{{.*}}, %{{.*}}, %{{.*}}, %[[LN]]#1, %[[LN]]#2) {axis = -1 : i64, epsilon = 9.99999974E-6 : f32, oasr.layer = "/ln"} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-DAG: %[[SHAPE:.*]] = oasr.node "Constant"() {oasr.layer = "/embed", value = dense<[16, 4]> : tensor<2xi64>}
// CHECK-DAG: oasr.node "GatherGrad"(%[[SHAPE]], %{{.*}}, %{{.*}}) {axis = 0 : i64, oasr.layer = "/embed"} : (tensor<2xi64>, tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<16x4xf32>
// CHECK: return
module attributes {oasr.opset = 17 : i64} {
  func.func @forward(%ids: tensor<2x3xi64> {oasr.input = "ids"},
                     %emb: tensor<16x4xf32> {oasr.param = "embed.weight"},
                     %g: tensor<4xf32> {oasr.param = "ln.weight"},
                     %bb: tensor<4xf32> {oasr.param = "ln.bias"})
      -> (tensor<2x3x4xf32> {oasr.output = "y"}) {
    %e = oasr.node "Gather"(%emb, %ids) : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32> loc("/embed")
    %n = oasr.node "LayerNormalization"(%e, %g, %bb) {axis = -1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32> loc("/ln")
    %kt = oasr.node "Transpose"(%n) {perm = [0, 2, 1]} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32> loc("/kT")
    %s = oasr.node "MatMul"(%n, %kt) : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32> loc("/qk")
    %two = oasr.node "Constant"() {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
    %sd = oasr.node "Div"(%s, %two) : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32> loc("/scale")
    %p = oasr.node "Softmax"(%sd) {axis = -1 : i64} : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32> loc("/softmax")
    %o = oasr.node "MatMul"(%p, %n) : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("/pv")
    %r2 = oasr.node "Constant"() {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
    %od = oasr.node "Div"(%o, %r2) : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32> loc("/gelu/div")
    %erf = oasr.node "Erf"(%od) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("/gelu/erf")
    %m = oasr.node "ReduceMean"(%erf) {axes = [-1], keepdims = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32> loc("/mean")
    %c = oasr.node "Sub"(%erf, %m) : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32> loc("/center")
    %sq = oasr.node "Pow"(%c, %two) : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32> loc("/pow")
    %rt = oasr.node "Sqrt"(%sq) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("/sqrt")
    %ge = oasr.node "com.microsoft"::"Gelu"(%rt) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("/gelu2")
    return %ge : tensor<2x3x4xf32>
  }
}

// -----

// Slice bounds computed from the static shape (as PyTorch exports chunk())
// are folded into SliceGrad's attributes.
// CHECK-LABEL: func.func @train_step
// CHECK: oasr.node "SliceGrad"(%{{.*}}) {axes = [1], ends = [6], oasr.layer = "/chunk1", starts = [3], steps = [1]} : (tensor<2x3xf32>) -> tensor<2x6xf32>
module {
  func.func @forward(%x: tensor<2x6xf32> {oasr.input = "x"},
                     %w: tensor<6xf32> {oasr.param = "w"})
      -> (tensor<2x3xf32> {oasr.output = "y"}) {
    %m = oasr.node "Mul"(%x, %w) : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32> loc("/mul")
    %s = oasr.node "Shape"(%m) : (tensor<2x6xf32>) -> tensor<2xi64>
    %i = oasr.node "Constant"() {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
    %d = oasr.node "Gather"(%s, %i) {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
    %two = oasr.node "Constant"() {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
    %h = oasr.node "Div"(%d, %two) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
    %e = oasr.node "Mul"(%h, %two) : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
    %one = oasr.node "Constant"() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
    %y = oasr.node "Slice"(%m, %h, %e, %one) : (tensor<2x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x3xf32> loc("/chunk1")
    return %y : tensor<2x3xf32>
  }
}
