// two-level=auto|flat|two-level: where the calibration has a second tier
// (ranks sharing nodes: Inputs/comm-two-level.json, 4 ranks in 2 nodes),
// each group is sent as one allreduce over every rank or as a two-level
// allreduce, whichever the model says is faster for its size
// (docs/compression.md). On Inputs/mlp8 at 200 Mbit/s: the two-level line
// starts 6e-4 s later and sends half the bytes between the nodes, so fc8's
// 10 kB group goes flat and every larger group two-level; the step is
// predicted 3.06 s against 5.82 s flat.
// RUN: oasr-opt %S/Inputs/mlp8.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp8.profile.json -o %t.step.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=wfbp comm=%S/Inputs/comm-two-level.json" --oasr-plan-report -o %t.auto.mlir | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=AUTO < %t.auto.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=oasr comm=%S/Inputs/comm-two-level.json" --oasr-plan-report="format=json" -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=oasr comm=%S/Inputs/comm-two-level.json two-level=flat" --oasr-plan-report -o %t.flat.mlir | FileCheck %s --check-prefix=FLATREPORT
// RUN: FileCheck %s --check-prefix=FLAT < %t.flat.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=wfbp comm=%S/Inputs/comm-two-level.json two-level=two-level" | FileCheck %s --check-prefix=FORCED
// A 16-bit wire: only the share between the nodes travels in bf16, so the
// two-level line's slope is 1e-9 + 4e-8 / 4 s/B against the flat 2e-8, and
// the same 7 groups go two-level (ZeRO++'s form). Every group of a
// steady-state plan is sent flat.
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=wfbp comm=%S/Inputs/comm-two-level.json grad-dtype=bf16" --oasr-plan-report -o %t.wire.mlir | FileCheck %s --check-prefix=WIREREPORT
// RUN: FileCheck %s --check-prefix=WIRE < %t.wire.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=oasr-step comm=%S/Inputs/comm-two-level.json" | FileCheck %s --check-prefix=FLAT
// PowerSGD's factors take a route too, chosen on both collectives' times
// together: fc5's 53 kB of factors go flat, the four largest groups'
// two-level.
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=wfbp comm=%S/Inputs/comm-two-level.json compress=powersgd:4" --oasr-plan-report -o %t.psgd.mlir | FileCheck %s --check-prefix=PSGDREPORT
// RUN: FileCheck %s --check-prefix=PSGD < %t.psgd.mlir
// PSGDREPORT: two-level allreduce (auto): 4 of 8 groups (4 of them PowerSGD factors, each of their two collectives so)
// PSGDREPORT: {{^}}    3      2      8392704
// PSGDREPORT-NEXT: {{^}}   *4      2     16785408
// PSGD: oasr.allreduce_start {{.*}} {group = 3 : i64, powersgd_rank = 4 : i64} : tensor<1024x2048xf32>
// PSGD: oasr.allreduce_start {{.*}} {group = 4 : i64, powersgd_rank = 4 : i64, two_level} : tensor<2048x2048xf32>
// The pipeline option reaches the pass, and the layout keeps the attribute.
// RUN: oasr-opt %S/Inputs/mlp8.mlir --oasr-train-pipeline="profile=%S/Inputs/mlp8.profile.json comm=%S/Inputs/comm-two-level.json strategy=wfbp" | FileCheck %s --check-prefix=PIPELINE
// RUN: oasr-opt %S/Inputs/mlp8.mlir --oasr-train-pipeline="profile=%S/Inputs/mlp8.profile.json comm=%S/Inputs/comm-two-level.json strategy=wfbp two-level=flat" | FileCheck %s --check-prefix=FLAT

// REPORT: comm: alpha=1.000e-04 s beta=4.000e-08 s/B two_level=L2 (intra alpha=2.000e-04 s beta=1.000e-09 s/B, inter alpha=5.000e-04 s beta=4.000e-08 s/B)
// REPORT: predicted iteration: 3064437.216 us
// REPORT: two-level allreduce (auto): 7 of 8 groups
// REPORT:     0      2        10280
// REPORT-NEXT: *1      2       525312            -     8210.000     8571.200    20302.752
// AUTO: two_level = {groups = 7 : i64, inter_alpha_s = 5.000000e-04 : f64, inter_beta_s_per_byte = 4.000000e-08 : f64, intra_alpha_s = 2.000000e-04 : f64, intra_beta_s_per_byte = 1.000000e-09 : f64, ranks = 4 : i64, ranks_per_node = 2 : i64, route = "auto"}
// AUTO: oasr.allreduce_start {{.*}} {group = 0 : i64} : tensor<10x256xf32>
// AUTO: oasr.allreduce_start {{.*}} {group = 1 : i64, two_level}
// JSON: "iteration_us": 3060976.0
// JSON: "two_level": {
// JSON-NEXT: "groups": [
// JSON-NEXT: "flat",
// JSON-NEXT: "two-level",
// JSON-NEXT: "two-level"
// WIREREPORT: predicted iteration: 1611390.656 us
// WIREREPORT: two-level allreduce (auto): 7 of 8 groups (marked *: a reduce-scatter in each node of 2 ranks, an allreduce of 1/2 in bf16 between the nodes
// WIREREPORT: *7      2     16793600            -    28810.000  1425961.056  1611390.656
// WIRE: oasr.allreduce_start {{.*}} {group = 0 : i64, wire_type = bf16}
// WIRE: oasr.allreduce_start {{.*}} {group = 1 : i64, two_level, wire_type = bf16}
// FLATREPORT: predicted iteration: 5820135.040 us
// FLATREPORT-NOT: two-level
// FLAT-NOT: two_level
// FORCED-COUNT-8: two_level}
// PIPELINE: two_level = {groups = 7 : i64
// PIPELINE: two_level}
