//===- OASRDialect.td - The oasr dialect -------------------*- tablegen -*-===//
//
// The oasr dialect: generic ONNX nodes plus the compiler's own concepts for
// data-parallel training (costs, gradients, fused allreduces, optimizer).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_DIALECT_OASRDIALECT_TD
#define OASR_DIALECT_OASRDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def OASR_Dialect : Dialect {
  let name = "oasr";
  let cppNamespace = "::mlir::oasr";
  let summary = "Data-parallel training graphs with planned fused allreduces";
  let description = [{
    The `oasr` dialect carries an ONNX training graph through the oasr
    compiler. ONNX nodes are kept generic (`oasr.node`, with the ONNX op type,
    domain and attributes, and the node name as location) so that any model
    imports; the compiler's own concepts are first-class:

    * parameters are function arguments tagged `oasr.param = "<onnx name>"`,
      non-trainable state (batch-norm running statistics) is tagged
      `oasr.state = "<onnx name>"`;
    * per-op cost is the `#oasr.cost<...>` attribute under the `oasr.cost` key;
    * gradients are communicated by fused allreduces
      (`oasr.allreduce_start` / `oasr.allreduce_wait`) placed by the planner;
    * parameters are updated by `oasr.optimizer_update`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
}

class OASR_Op<string mnemonic, list<Trait> traits = []>
    : Op<OASR_Dialect, mnemonic, traits>;

#endif // OASR_DIALECT_OASRDIALECT_TD
