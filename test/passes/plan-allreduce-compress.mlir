// compress=powersgd:R|auto[:R[-M]]: groups may travel as PowerSGD factors
// (docs/compression.md). On Inputs/mlp8 (145 MB of gradients):
//  - at 200 Mbit/s (beta = 40 ns/B) auto compresses every group of its
//    oasr plan, and chooses the grouping with the forms: 3 groups, where
//    wfbp's grouping with the same forms predicts more (123.0 ms) and
//    leaves fc8's small group plain (its factors save 6 KB and cost a
//    second collective);
//  - on the profile's link (2.5 GB/s) the factors' compute costs more than
//    the bytes they save: auto sends everything plain, as with compress=off;
//  - powersgd:4 compresses every group that holds a matrix worth it.
// RUN: oasr-opt %S/Inputs/mlp8.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp8.profile.json -o %t.step.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 alpha=5e-4 beta=4e-8" --oasr-plan-report -o %t.slow.mlir | FileCheck %s --check-prefix=SLOWREPORT
// RUN: FileCheck %s --check-prefix=SLOW < %t.slow.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 strategy=wfbp alpha=5e-4 beta=4e-8" --oasr-plan-report="format=json" -o /dev/null | FileCheck %s --check-prefix=WFBP
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4" | FileCheck %s --check-prefix=FAST
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=powersgd:4 strategy=wfbp" | FileCheck %s --check-prefix=FORCED
// At 800 Mbit/s (beta = 10 ns/B) the first group's factors end before
// backward does: auto raises its rank to 8 (one matrix then travels plain),
// the highest the step hides; auto:4-4 keeps rank 4.
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 alpha=5e-4 beta=1e-8" --oasr-plan-report -o %t.raised.mlir | FileCheck %s --check-prefix=RAISED
// RUN: FileCheck %s --check-prefix=RAISEDIR < %t.raised.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4-4 alpha=5e-4 beta=1e-8" --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=PINNED
// The pipeline option reaches the pass, and the layout keeps the attribute.
// RUN: oasr-opt %S/Inputs/mlp8.mlir --oasr-train-pipeline="profile=%S/Inputs/mlp8.profile.json compress=powersgd:2" | FileCheck %s --check-prefix=PIPELINE
// A vectors-only group (mlp3's biases alone under wfbp would be one; here
// a 1-D model) is sent plain even under powersgd:R, and the report says so.
// RUN: oasr-opt %s --oasr-plan-allreduce="compress=powersgd:4 strategy=wfbp" --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=VECTORS
// Compression's compute rates: a calibration's (`oasr-bench comm` records
// compress_us_per_mac and compress_us_per_element), else compress-gmacs,
// else the default; the plan and its report say which.
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 comm=%S/Inputs/comm-compress.json" --oasr-plan-report -o %t.cal.mlir | FileCheck %s --check-prefix=CALREPORT
// RUN: FileCheck %s --check-prefix=CAL < %t.cal.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 comm=%S/Inputs/comm-compress.json compress-gmacs=40" --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=GMACS
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 alpha=5e-4 beta=4e-8" -o - | FileCheck %s --check-prefix=DEFAULT
// CALREPORT: compression auto:4: 3 of 3 groups send PowerSGD factors (channel time per form, model above; compute 1.00e-03 us/multiply-add, 1.00e-03 us/element, as oasr-bench comm measured them)
// CAL: compress_from = "calibration", compress_us_per_element = 1.000000e-03 : f64, compress_us_per_mac = 1.000000e-03 : f64
// GMACS: compute 2.50e-05 us/multiply-add, 1.00e-03 us/element, from compress-gmacs)
// DEFAULT: compress_from = "default"

// The steady-state step compresses too: oasr-step starts from the same
// compressed groups as a barrier plan (oasr-barrier: 118.9 ms, as oasr's
// backward-only step) and, with per-layer waits and the groups cut where
// the next forward needs them first, predicts a period of 113.6 ms; every
// group is one allreduce of factors, and the IR records the forms.
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 alpha=5e-4 beta=4e-8 strategy=oasr-barrier" --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=BARRIER
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 alpha=5e-4 beta=4e-8 strategy=oasr-step" --oasr-plan-report -o %t.steady.mlir | FileCheck %s --check-prefix=STEADY
// RUN: FileCheck %s --check-prefix=STEADYIR < %t.steady.mlir
// BARRIER: steady-state step: period 118864.99{{[0-9]}} us (the next forward waits for every group, 3 allreduce(s)
// BARRIER: compression auto:4: 3 of 3 groups send PowerSGD factors
// STEADY: oasr plan: model 'mlp8', strategy oasr-step, 5 groups
// STEADY: steady-state step: period 113560.81{{[0-9]}} us (the next forward waits per layer, 5 allreduce(s) in the plan's order)
// STEADY: compression auto:4: 5 of 5 groups send PowerSGD factors
// STEADYIR: compressed_groups = 5 : i64{{.*}}steady = {forward_waits = true, {{.*}}pieces = array<i64: 1, 1, 1, 1, 1>, scatter = array<i64: 0, 0, 0, 0, 0>}
// STEADYIR-COUNT-5: oasr.allreduce_start {{.*}}powersgd_rank = 4

// With grad-dtype=bf16 the factors and vectors travel in bf16: each
// group's wire bytes halve (group 0: 22116 against 44232) and the step
// predicts 108.6 ms against 118.9 ms; the IR carries both attributes.
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="compress=auto:4 alpha=5e-4 beta=4e-8 grad-dtype=bf16" --oasr-plan-report -o %t.bf16.mlir | FileCheck %s --check-prefix=BF16
// RUN: FileCheck %s --check-prefix=BF16IR < %t.bf16.mlir
// BF16: predicted iteration: 108646.85{{[0-9]}} us
// BF16: 0   powersgd:4    53195.840     3448.855        22116  3 of 6 tensors as factors
// BF16IR: oasr.allreduce_start {{.*}}{group = 0 : i64, powersgd_rank = 4 : i64, wire_type = bf16}

// Errors: plan-allreduce-compress-invalid.mlir.

// SLOWREPORT: oasr plan: model 'mlp8', strategy oasr, 3 groups, 16 gradients, 145294376 bytes
// SLOWREPORT: predicted iteration: 118864.99{{[0-9]}} us
// SLOWREPORT-NEXT: lower bound: n/a (it carries every gradient byte; compressed groups send fewer)
// SLOWREPORT: compression auto:4: 3 of 3 groups send PowerSGD factors
// SLOWREPORT-NEXT: group         form     plain_us  powersgd_us   wire_bytes  why
// SLOWREPORT-NEXT:     0   powersgd:4   105891.680     4333.495        44232  3 of 6 tensors as factors, 59.6x fewer bytes; the factors end sooner
// SLOWREPORT-NEXT:     1   powersgd:4  1007624.480    21035.564       126976  2 of 4 tensors as factors, 198.3x fewer bytes; the factors end sooner
// SLOWREPORT-NEXT:     2   powersgd:4  4699758.880    84885.934       352256  3 of 6 tensors as factors, 333.5x fewer bytes; the factors end sooner

// RAISED: compression auto:4: 3 of 3 groups send PowerSGD factors
// RAISED-NEXT: group         form     plain_us  powersgd_us   wire_bytes  why
// RAISED-NEXT:     0   powersgd:8    26847.920     3599.763        87080  2 of 6 tensors as factors, 30.3x fewer bytes; the highest rank that keeps the step
// RAISED-NEXT:     1   powersgd:4  {{.*}}; the factors end sooner
// RAISED-NEXT:     2   powersgd:4  {{.*}}; the factors end sooner
// RAISEDIR: oasr.allreduce_start {{.*}}{group = 0 : i64, powersgd_rank = 8 : i64}
// RAISEDIR: oasr.allreduce_start {{.*}}{group = 1 : i64, powersgd_rank = 4 : i64}
// PINNED: compression auto:4-4: 3 of 3 groups send PowerSGD factors
// PINNED-NEXT: group
// PINNED-NEXT:     0   powersgd:4 {{.*}}; the factors end sooner

// SLOW: oasr.plan = {alpha_s = 5.000000e-04 : f64, beta_s_per_byte = 4.000000e-08 : f64, compress = "auto:4", {{.*}}compressed_groups = 3 : i64, {{.*}}groups = 3 : i64,
// SLOW-NOT: lower_bound_us
// SLOW-SAME: strategy = "oasr"
// SLOW-COUNT-3: oasr.allreduce_start {{.*}}{group = {{[0-2]}} : i64, powersgd_rank = 4 : i64}

// WFBP: "compress": "auto:4"
// WFBP: "forms": [
// WFBP-NEXT: {
// WFBP-NEXT: "form": "plain",
// WFBP-NEXT: "plain_us": 911.2
// WFBP-NEXT: "powersgd_us": 1177.9
// WFBP: "form": "powersgd:4",
// WFBP: "iteration_us": 123048.26
// WFBP: "lower_bound_us": null,

// FAST: compress = "auto:4", {{.*}}compressed_groups = 0 : i64
// FAST-NOT: powersgd_rank

// FORCED: compressed_groups = 8 : i64
// FORCED-COUNT-8: powersgd_rank = 4 : i64

// PIPELINE: oasr.allreduce_start {{.*}}{buffer_bytes = {{[0-9]+}} : i64, group = 0 : i64, offsets = array<i64: {{.*}}>, powersgd_rank = 2 : i64}

// VECTORS: compression powersgd:4: 0 of 1 groups send PowerSGD factors
// VECTORS:     0        plain {{.*}}  -  {{.*}}no matrix worth compressing (vectors, or factors over half the elements): sent as it is
module {
  func.func @train_step(%a: tensor<64xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<64xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64, oasr.cost = #oasr.cost<forward_us = 1.0>} : (tensor<64xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.cost = #oasr.cost<backward_us = 1.0>, oasr.layer = "/a"} : (tensor<64xf32>) -> tensor<64xf32>
    return %l, %ga : tensor<f32>, tensor<64xf32>
  }
}
