// The bundled example parses, verifies and round-trips.
// RUN: oasr-opt %oasr_src/examples/mlp_train_step.mlir | oasr-opt | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK: %[[T0:.*]] = oasr.allreduce_start {{.*}}group = 0
// CHECK: %[[T1:.*]] = oasr.allreduce_start {{.*}}group = 1
// CHECK: oasr.allreduce_wait %[[T0]]
// CHECK: oasr.allreduce_wait %[[T1]]
