// The compiler's last step as a pass: the planned step lowered to an
// .oasrprog file that oasr-run trains without compiling, as
// `oasr-run --compile-only` writes one. The IR is unchanged, and the file
// trains to the same loss as the module it came from.
// RUN: rm -rf %t && mkdir -p %t
// RUN: oasr-opt %s --oasr-train-pipeline='strategy=wfbp lr=0.1' --oasr-emit-program=file=%t/mlp.oasrprog | FileCheck %s --check-prefix=IR
// IR: oasr.optimizer_update "sgd"
// RUN: oasr-opt %s --oasr-train-pipeline='strategy=wfbp lr=0.1' -o %t/mlp.mlir
// RUN: oasr-run %t/mlp.oasrprog --data=synthetic --steps=3 --threads=1 --quiet > %t/prog.log
// RUN: oasr-run %t/mlp.mlir --data=synthetic --steps=3 --threads=1 --quiet > %t/mlir.log
// RUN: FileCheck %s --check-prefix=LOSS < %t/prog.log
// RUN: grep "final loss" %t/prog.log > %t/prog.loss
// RUN: grep "final loss" %t/mlir.log > %t/mlir.loss
// RUN: cmp %t/prog.loss %t/mlir.loss
// LOSS: final loss

// Bad input: the name, an unwritable path, a module not compiled for
// training.
// RUN: not oasr-opt %s --oasr-train-pipeline='strategy=wfbp' --oasr-emit-program=file=%t/mlp.bin 2>&1 | FileCheck %s --check-prefix=EXT
// EXT: error: --oasr-emit-program: file='{{.*}}mlp.bin': the program file's name must end in .oasrprog
// RUN: not oasr-opt %s --oasr-train-pipeline='strategy=wfbp' --oasr-emit-program=file=%t/nodir/mlp.oasrprog 2>&1 | FileCheck %s --check-prefix=DIR
// DIR: error: --oasr-emit-program: {{.*}}nodir/mlp.oasrprog: cannot write: No such file or directory
// RUN: not oasr-opt %s --oasr-emit-program=file=%t/forward.oasrprog 2>&1 | FileCheck %s --check-prefix=FORWARD
// FORWARD: error: --oasr-emit-program: the module was not compiled for training: it has @forward but no @train_step
module {
  func.func @forward(%x: tensor<4x8xf32> {oasr.input = "x"},
                     %w: tensor<8x3xf32> {oasr.param = "w"})
      -> (tensor<4x3xf32> {oasr.output = "logits"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32> loc("/fc")
    return %m : tensor<4x3xf32>
  }
}
