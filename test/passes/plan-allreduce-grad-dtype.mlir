// grad-dtype=bf16|f16: gradients travel in half the bytes. The planner
// charges beta on half the gradient bytes, so on Inputs/mlp8 (145 MB of
// gradients, alpha = 500 us, beta = 0.4 ns/B) the oasr plan changes from 6
// to 7 groups and its predicted iteration from 69.2 to 43.6 ms; every start
// records the wire type and oasr.plan records grad_dtype. f32 (the default)
// leaves the IR as it was.
// RUN: oasr-opt %S/Inputs/mlp8.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp8.profile.json -o %t.step.mlir
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce | FileCheck %s --check-prefix=F32
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce=grad-dtype=f32 | FileCheck %s --check-prefix=F32
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce=grad-dtype=bf16 | FileCheck %s --check-prefix=BF16
// The pipeline option reaches the pass; the layout keeps the attribute.
// RUN: oasr-opt %S/Inputs/mlp8.mlir --oasr-train-pipeline="profile=%S/Inputs/mlp8.profile.json grad-dtype=f16" | FileCheck %s --check-prefix=F16
// A strategy without a model still sends (and records) the wire type.
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce="strategy=wfbp grad-dtype=bf16" | FileCheck %s --check-prefix=NOMODEL
// The plan report and oasr-plan agree on the bf16 plan, group by group.
// RUN: oasr-plan %S/Inputs/mlp8.profile.json --strategy=oasr,optimal --grad-dtype=bf16 --format=json > %t.plan.json
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=oasr grad-dtype=bf16" --oasr-plan-report="format=json output=%t.oasr.json" -o /dev/null
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="strategy=optimal grad-dtype=bf16" --oasr-plan-report="format=json output=%t.optimal.json" -o /dev/null
// RUN: %python %S/Inputs/compare_plan.py %t.plan.json %t.oasr.json %t.optimal.json | FileCheck %s --check-prefix=MATCH
// RUN: FileCheck %s --check-prefix=JSON < %t.oasr.json
// RUN: FileCheck %s --check-prefix=PLANJSON < %t.plan.json
// RUN: oasr-opt %t.step.mlir --oasr-plan-allreduce="grad-dtype=bf16" --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=TEXT
// Errors: plan-allreduce-invalid.mlir.

// F32: oasr.plan = {alpha_s = 5.000000e-04 : f64, beta_s_per_byte = 4.000000e-10 : f64, group_overhead_us = 0.000000e+00 : f64, groups = 6 : i64, {{.*}}predicted_iteration_us = 69223.63{{[0-9]*}} : f64, strategy = "oasr"
// F32-NOT: grad_dtype
// F32-LABEL: func.func @train_step
// F32-NOT: wire_type

// BF16: oasr.plan = {alpha_s = 5.000000e-04 : f64, beta_s_per_byte = 4.000000e-10 : f64, grad_dtype = "bf16", group_overhead_us = 0.000000e+00 : f64, groups = 7 : i64, {{.*}}predicted_iteration_us = 43593.76{{[0-9]*}} : f64, strategy = "oasr"
// BF16-LABEL: func.func @train_step
// BF16-COUNT-7: oasr.allreduce_start {{.*}}{group = {{[0-6]}} : i64, wire_type = bf16}
// BF16-NOT: oasr.allreduce_start

// F16: grad_dtype = "f16"
// F16-LABEL: func.func @train_step
// F16: oasr.allreduce_start %{{.*}} {buffer_bytes = {{[0-9]+}} : i64, group = 0 : i64, offsets = array<i64: {{.*}}>, wire_type = f16}

// NOMODEL: oasr.plan = {grad_dtype = "bf16", groups = 3 : i64, strategy = "wfbp"
// NOMODEL: oasr.allreduce_start {{.*}}{group = 0 : i64, wire_type = bf16}

// MATCH: oasr: match: 43593.{{[0-9]+}} us, 7 groups of
// MATCH-NEXT: optimal: match: 43593.{{[0-9]+}} us, 7 groups of
// MATCH-NEXT: compare_plan: 2 of 2 strategies match

// JSON: "grad_dtype": "bf16"
// PLANJSON: "grad_dtype": "bf16"

// TEXT: oasr plan: model 'mlp8', strategy oasr, 7 groups, 16 gradients, 145294376 bytes
// TEXT-NEXT: gradients travel as bf16 (half the bytes on the wire)
// TEXT-NEXT: comm: alpha=5.000e-04 s beta=4.000e-10 s/B grad_dtype=bf16 (beta x 0.50 per gradient byte)
// TEXT-NEXT: predicted iteration: 43593.770 us
