// RUN: oasr-opt %s --oasr-layout-gradients -split-input-file | FileCheck %s
// RUN: oasr-opt %s --oasr-layout-gradients=alignment=4 -split-input-file | FileCheck %s --check-prefix=PACKED
// RUN: not oasr-opt %s --oasr-layout-gradients=alignment=48 -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// Default 256-byte alignment: 10x32xf32 (1280 B) at 0, 10xf32 (40 B) at 1280,
// 3xf32 (12 B) at 1536; the buffer is rounded up to 1792.
// CHECK-LABEL: func.func @groups
// CHECK: oasr.allreduce_start %{{.*}}, %{{.*}}, %{{.*}} {buffer_bytes = 1792 : i64, group = 0 : i64, offsets = array<i64: 0, 1280, 1536>}
// CHECK: oasr.allreduce_start %{{.*}} {buffer_bytes = 256 : i64, group = 1 : i64, offsets = array<i64: 0>}
// PACKED-LABEL: func.func @groups
// PACKED: {buffer_bytes = 1332 : i64, group = 0 : i64, offsets = array<i64: 0, 1280, 1320>}
// PACKED: {buffer_bytes = 4 : i64, group = 1 : i64, offsets = array<i64: 0>}
// BAD: error: 'alignment' must be a power of two, got 48
func.func @groups(%a: tensor<10x32xf32>, %b: tensor<10xf32>, %c: tensor<3xf32>, %d: tensor<f32>)
    -> (tensor<10x32xf32>, tensor<10xf32>, tensor<3xf32>, tensor<f32>) {
  %t0 = oasr.allreduce_start %a, %b, %c {group = 0 : i64} : tensor<10x32xf32>, tensor<10xf32>, tensor<3xf32>
  %t1 = oasr.allreduce_start %d {group = 1 : i64} : tensor<f32>
  %r:3 = oasr.allreduce_wait %t0 : tensor<10x32xf32>, tensor<10xf32>, tensor<3xf32>
  %s = oasr.allreduce_wait %t1 : tensor<f32>
  return %r#0, %r#1, %r#2, %s : tensor<10x32xf32>, tensor<10xf32>, tensor<3xf32>, tensor<f32>
}
