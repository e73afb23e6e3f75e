//===- OASRAttrs.td - Attributes and types of oasr ---------*- tablegen -*-===//

#ifndef OASR_DIALECT_OASRATTRS_TD
#define OASR_DIALECT_OASRATTRS_TD

include "oasr/Dialect/OASRDialect.td"

// A non-negative time in microseconds, 0 by default (omitted when printing).
def OASR_TimeParameter : AttrOrTypeParameter<"::llvm::APFloat", "time (us)"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let defaultValue = "::llvm::APFloat(0.0)";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if ($_parser.parseFloat(value))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }() }];
  let printer = [{ $_printer.printFloat($_self) }];
}

def OASR_CostAttr : AttrDef<OASR_Dialect, "Cost"> {
  let mnemonic = "cost";
  let summary = "Per-op cost: measured or analytic time, FLOPs and bytes";
  let description = [{
    Attached under the `oasr.cost` key to forward and backward ops by
    `--oasr-annotate-cost`. Times are microseconds for one training step of
    one rank; `flops` counts floating-point operations and `bytes` the memory
    traffic of the op. Parameters left at zero are omitted when printing.

    ```mlir
    #oasr.cost<forward_us = 41.5, flops = 118013952, bytes = 9633792>
    #oasr.cost<backward_us = 812.5>
    ```
  }];
  let parameters = (ins
    OASR_TimeParameter:$forward_us,
    OASR_TimeParameter:$backward_us,
    DefaultValuedParameter<"int64_t", "0", "floating-point operations">:$flops,
    DefaultValuedParameter<"int64_t", "0", "bytes moved">:$bytes
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "double":$forwardUs, "double":$backwardUs,
                     CArg<"int64_t", "0">:$flops, CArg<"int64_t", "0">:$bytes), [{
      return $_get($_ctxt, ::llvm::APFloat(forwardUs), ::llvm::APFloat(backwardUs),
                   flops, bytes);
    }]>
  ];
  let extraClassDeclaration = [{
    double getForwardTime() const { return getForwardUs().convertToDouble(); }
    double getBackwardTime() const { return getBackwardUs().convertToDouble(); }
  }];
}

def OASR_TokenType : TypeDef<OASR_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "Handle of an in-flight fused allreduce";
  let description = [{
    Produced by `oasr.allreduce_start` and consumed exactly once by
    `oasr.allreduce_wait`.
  }];
}

#endif // OASR_DIALECT_OASRATTRS_TD
