// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=h100 | FileCheck %s --check-prefixes=CHECK,H100
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=k80 | FileCheck %s --check-prefixes=CHECK,K80
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost | FileCheck %s --check-prefixes=CHECK,CPU
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=h200 | FileCheck %s --check-prefixes=CHECK,H200
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=V100 | FileCheck %s --check-prefixes=CHECK,V100
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=device=h100 --mlir-print-op-generic | oasr-opt | FileCheck %s --check-prefixes=CHECK,H100

// The roofline device is recorded on the module.
// H100: oasr.cost_model = {bytes_per_s = 3.350000e+12 : f64, device = "h100", peak_flops = 6.700000e+13 : f64, source = "roofline"
// K80: oasr.cost_model = {bytes_per_s = 2.400000e+11 : f64, device = "k80", peak_flops = 4.365000e+12 : f64, source = "roofline"
// CPU: oasr.cost_model = {bytes_per_s = 1.700000e+10 : f64, device = "cpu", peak_flops = 1.850000e+11 : f64, source = "roofline"
// Device names are case-insensitive (V100); the generic form round-trips
// (#oasr.cost<> included).
// H200: oasr.cost_model = {bytes_per_s = 4.800000e+12 : f64, device = "h200", peak_flops = 6.700000e+13 : f64, source = "roofline"
// V100: oasr.cost_model = {bytes_per_s = 9.000000e+11 : f64, device = "v100", peak_flops = 1.570000e+13 : f64, source = "roofline"

// Each gradient result carries its bytes and its ready position (index of
// the backward node that makes it ready, in backward order).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<512x256xf32> {oasr.grad = "fc1.weight", oasr.grad_bytes = 524288 : i64, oasr.ready = 6 : i64}
// CHECK-SAME: tensor<512xf32> {oasr.grad = "fc1.bias", oasr.grad_bytes = 2048 : i64, oasr.ready = 6 : i64}
// CHECK-SAME: tensor<512x512xf32> {oasr.grad = "fc2.weight", oasr.grad_bytes = 1048576 : i64, oasr.ready = 4 : i64}
// CHECK-SAME: tensor<10x512xf32> {oasr.grad = "fc3.weight", oasr.grad_bytes = 20480 : i64, oasr.ready = 2 : i64}
// CHECK-SAME: tensor<10xf32> {oasr.grad = "fc3.bias", oasr.grad_bytes = 40 : i64, oasr.ready = 2 : i64}

// Gemm 32x256 by 256x512 plus bias: 2*32*512*256 + 32*512 FLOPs; bytes read
// and written: (32*256 + 512*256 + 512 + 32*512) * 4; memory-bound on both
// (624640 / 3.35e12 s and 624640 / 240e9 s).
// H100: oasr.node "Gemm"{{.*}}oasr.cost = #oasr.cost<forward_us = 0.18645{{[0-9]*}}, flops = 8404992, bytes = 624640>
// K80: oasr.node "Gemm"{{.*}}oasr.cost = #oasr.cost<forward_us = 2.60266{{[0-9]*}}, flops = 8404992, bytes = 624640>
// CHECK: oasr.node "Relu"{{.*}}oasr.cost = #oasr.cost<forward_us = {{.*}}, flops = 16384, bytes = 131072>
// The seed constant moves nothing.
// CHECK: oasr.node "Constant"() {oasr.cost = #oasr.cost<>, oasr.layer = "loss"
// CHECK: oasr.node "SoftmaxCrossEntropyLossGrad"{{.*}}oasr.cost = #oasr.cost<backward_us =
// The first layer's input gradient is unused: GemmGrad counts dB and dW only.
// CHECK: oasr.node "GemmGrad"{{.*}}oasr.cost = #oasr.cost<backward_us = {{.*}}, flops = 33570816, {{.*}}oasr.layer = "/fc2/Gemm"
// CHECK: oasr.node "GemmGrad"{{.*}}oasr.cost = #oasr.cost<backward_us = {{.*}}, flops = 8404992, {{.*}}oasr.layer = "/fc1/Gemm"
