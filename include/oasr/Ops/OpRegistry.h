//===- OpRegistry.h - Everything oasr knows about one op --------*- C++ -*-===//
//
// One entry per op, behind one key (domain, op type, since-opset), in the
// style of torch-mlir's `onOp(name, sinceVersion, fn)` tables: the shape and
// fold rules the importer uses, the training form and gradient rule autodiff
// uses, the cost rule annotate-cost uses, the traits the executor reads
// (view, in place, elementwise), and which kernel backends must implement
// it. The entries live in lib/Ops/*Ops.cpp, one file per family; adding an
// op is one entry there plus its kernels (docs/adding-an-op.md). A coverage
// test (test/unit/Ops) walks the registry against the backends' kernels, and
// docs/generated/Ops.md is printed from it.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_OPS_OPREGISTRY_H
#define OASR_OPS_OPREGISTRY_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir {
class Operation;
namespace oasr {
class NodeOp;
} // namespace oasr
} // namespace mlir

namespace oasr::ops {

//===----------------------------------------------------------------------===//
// Facts the shape and fold rules work on (independent of ONNX protobuf and
// of MLIR, so the importer and the tests can feed them)
//===----------------------------------------------------------------------===//

/// Element type (an ONNX TensorProto.DataType value) and shape of a value.
struct TensorFacts {
  int32_t elemType = 0;
  bool ranked = false;
  /// -1 for an unknown dimension.
  llvm::SmallVector<int64_t, 4> dims;

  bool isStatic() const;
  int64_t numElements() const;
  static TensorFacts get(int32_t type, llvm::ArrayRef<int64_t> dims);
};

/// A small integer (or bool) tensor known at import time (shape arithmetic).
struct FoldedInts {
  int32_t elemType = 0;
  llvm::SmallVector<int64_t, 4> dims;
  llvm::SmallVector<int64_t, 8> values;
};

/// Read access to a node's attributes, whatever holds them.
class AttrReader {
public:
  virtual ~AttrReader();
  virtual bool has(llvm::StringRef name) const = 0;
  virtual std::optional<int64_t> findInt(llvm::StringRef name) const = 0;
  virtual std::optional<double> findFloat(llvm::StringRef name) const = 0;
  virtual std::optional<std::string> findString(llvm::StringRef name) const = 0;
  virtual std::optional<llvm::SmallVector<int64_t>>
  findInts(llvm::StringRef name) const = 0;
  virtual std::optional<llvm::SmallVector<double>>
  findFloats(llvm::StringRef name) const = 0;
  /// Type and shape of a tensor attribute (Constant's `value`).
  virtual std::optional<TensorFacts>
  findTensorType(llvm::StringRef name) const = 0;
  /// Values of a small integer or bool tensor attribute.
  virtual std::optional<llvm::SmallVector<int64_t>>
  findTensorInts(llvm::StringRef name) const = 0;

  int64_t getInt(llvm::StringRef name, int64_t dflt) const {
    return findInt(name).value_or(dflt);
  }
  double getFloat(llvm::StringRef name, double dflt) const {
    return findFloat(name).value_or(dflt);
  }
  std::string getString(llvm::StringRef name, llvm::StringRef dflt) const {
    return findString(name).value_or(dflt.str());
  }
};

/// What a shape rule sees. Inputs are null when absent or of unknown rank;
/// `folded` holds the import-time values of small integer inputs.
struct ShapeContext {
  llvm::StringRef op;
  int opset = 0;
  const AttrReader &attrs;
  /// Per input: its name (empty when the optional input is left out).
  llvm::ArrayRef<std::string> names;
  llvm::ArrayRef<const TensorFacts *> in;
  llvm::ArrayRef<const FoldedInts *> folded;
  /// Per input: the values of a small float constant (Resize's scales), or
  /// null.
  llvm::ArrayRef<const llvm::SmallVector<double, 4> *> floats;
  /// One per result; the rule fills them.
  llvm::MutableArrayRef<TensorFacts> out;
  /// Why the rule could not decide (for the importer's error).
  std::string why;

  size_t numInputs() const { return names.size(); }
  size_t numOutputs() const { return out.size(); }
  /// True when input `i` is given (not left out).
  bool present(size_t i) const { return i < names.size() && !names[i].empty(); }
  /// Input `i` when its rank is known, else null.
  const TensorFacts *input(size_t i) const;
  /// True when inputs 0..n-1 have known ranks; sets `why` otherwise.
  bool needInputs(size_t n);
  /// The folded value of input `i`, or null (setting `why`).
  const FoldedInts *needFolded(size_t i);
  /// The folded value of input `i`, or null.
  const FoldedInts *getFolded(size_t i) const {
    return i < folded.size() ? folded[i] : nullptr;
  }
  /// Sets every result to `info`; returns true.
  bool setAll(const TensorFacts &info);
  /// Sets `why`; returns false.
  bool fail(const llvm::Twine &reason);
};

/// What a fold rule sees: every input folded (null where left out or not
/// foldable) and the inferred static type of result 0. The rule fills
/// `result.values` (numElements() of them) and returns true, or false to
/// leave the value unfolded.
struct FoldContext {
  llvm::StringRef op;
  const AttrReader &attrs;
  llvm::ArrayRef<const TensorFacts *> in;
  llvm::ArrayRef<const FoldedInts *> folded;
  const TensorFacts &outType;
  FoldedInts result;
};

//===----------------------------------------------------------------------===//
// Rules and traits
//===----------------------------------------------------------------------===//

struct GradContext;

/// Fills ShapeContext::out; false (with `why`) when it cannot.
using ShapeRule = bool (*)(ShapeContext &);
using FoldRule = bool (*)(FoldContext &);
/// Rewrites a forward node into the form its gradient needs (extra results
/// such as BatchNormalization's saved statistics), before differentiation.
using TrainingFormRule = mlir::LogicalResult (*)(mlir::oasr::NodeOp);
/// Fills GradContext::dIns; failure with an error on the node.
using GradRule = mlir::LogicalResult (*)(GradContext &);

/// FLOPs and bytes one execution of a node moves (the roofline's inputs).
struct Work {
  double flops = 0;
  double bytes = 0;
};
using CostRule = Work (*)(mlir::Operation *);

enum OpTrait : unsigned {
  /// The result is its operand 0 reinterpreted (same bytes): the executor
  /// aliases it, the kernels copy only when the buffers differ.
  View = 1u << 0,
  /// The result may be written over a same-shaped operand that dies here.
  InPlace = 1u << 1,
  /// One result element per (broadcast) operand element.
  Elementwise = 1u << 2,
  /// A gradient op: autodiff emits it, import does not (unless a training
  /// graph carries it).
  Gradient = 1u << 3,
  /// A product whose kernels may write f32 results from 16-bit operands
  /// (they accumulate in f32): oasr-fuse-casts folds a widening Cast of its
  /// result into it.
  WideResults = 1u << 4,
};

/// Which kernel backends must implement an op.
enum class Kernels : uint8_t {
  /// Both the CPU and the CUDA backend (the default).
  All,
  /// The CPU backend only, for the reason given (the visible CPU-only list).
  CpuOnly,
  /// None: the importer folds or understands the op for planning, but no
  /// backend runs it (the reason says why).
  None,
};

/// How an op runs under bf16/f16 mixed precision: the policy the autocast
/// pass (`oasr-autocast`, docs/precision.md) reads. Learnt from PyTorch's
/// autocast lists (lower precision, fp32, promote), kept per op here.
enum class Precision : uint8_t {
  /// In the type of its computed float operands, the widest of them when
  /// they differ (PyTorch's promote); parameters and constants are not cast
  /// (kernels read f32 biases and scalars as they are). The default.
  Follow,
  /// Products (Conv, MatMul, Gemm): every float operand cast to the low
  /// type, float results low; kernels accumulate in f32.
  Lower,
  /// Accuracy-sensitive (exp/log/pow, softmax, losses, reductions): float
  /// operands cast to f32, float results f32.
  F32,
  /// Normalisations: X and Y in X's type (by the Follow rule); scale, bias
  /// and the statistics stay f32.
  Normalize,
  /// The op fixes its result type itself (Cast, Constant, Shape, ...):
  /// neither operands nor results change.
  Keep,
};

/// "follow", "lower", "f32", "normalize", "keep".
const char *precisionName(Precision p);

/// The parts a node's operands and results play that generic code reads
/// (the executor, autodiff), so that no code outside lib/Ops and the
/// importer finds them by the op's name.
struct OpRoles {
  /// A loss: result 0 is the step's loss, operand 0 the scores and
  /// operand 1 the labels.
  bool loss = false;
  /// Running statistics a training step updates: operands [statsOperand,
  /// statsOperand + statsCount) come back as results [statsResult, ...).
  int statsOperand = -1, statsResult = -1, statsCount = 0;
  /// Operands whose parameters start at one (a normalization's scale and
  /// variance); the node's other parameter operands start at zero.
  std::vector<unsigned> onesOperands;
  /// A lookup into the table of operand 0 by the indices of this operand
  /// (an embedding reads token ids); -1 when none.
  int lookupIndices = -1;
  /// The node's value is its attribute (Constant): materialized once into
  /// a buffer, not run.
  bool constant = false;
  /// The node converts operand 0 to its result's element type (Cast): the
  /// executor may keep a parameter's 16-bit copy up to date in the
  /// optimizer update instead of running the node (docs/precision.md).
  bool convert = false;
};

/// Everything oasr knows about one op since one opset.
struct OpDef {
  std::string domain; ///< "" for ai.onnx and oasr's own gradient ops
  std::string name;
  int since = 1;
  unsigned traits = 0;
  Kernels kernels = Kernels::All;
  std::string kernelsWhy;
  Precision precision = Precision::Follow;
  ShapeRule shape = nullptr;
  FoldRule fold = nullptr;
  TrainingFormRule trainingForm = nullptr;
  GradRule grad = nullptr;
  CostRule cost = nullptr;
  /// One line for the generated table.
  std::string summary;
  OpRoles roles;

  bool has(OpTrait t) const { return (traits & t) != 0; }
};
/// The parts `node`'s operands and results play (OpDef::roles of its
/// registry entry; none for an op the registry does not know).
const OpRoles &rolesOf(mlir::oasr::NodeOp node);

/// Fluent construction of an entry (OpRegistry::add).
class OpDefBuilder {
public:
  explicit OpDefBuilder(OpDef &def) : def(def) {}
  OpDefBuilder &traits(unsigned t) {
    def.traits |= t;
    return *this;
  }
  OpDefBuilder &shape(ShapeRule r) {
    def.shape = r;
    return *this;
  }
  OpDefBuilder &fold(FoldRule r) {
    def.fold = r;
    return *this;
  }
  OpDefBuilder &trainingForm(TrainingFormRule r) {
    def.trainingForm = r;
    return *this;
  }
  OpDefBuilder &grad(GradRule r) {
    def.grad = r;
    return *this;
  }
  OpDefBuilder &cost(CostRule r) {
    def.cost = r;
    return *this;
  }
  OpDefBuilder &cpuOnly(llvm::StringRef why) {
    def.kernels = Kernels::CpuOnly;
    def.kernelsWhy = why.str();
    return *this;
  }
  OpDefBuilder &noKernels(llvm::StringRef why) {
    def.kernels = Kernels::None;
    def.kernelsWhy = why.str();
    return *this;
  }
  OpDefBuilder &precision(Precision p) {
    def.precision = p;
    return *this;
  }
  OpDefBuilder &summary(llvm::StringRef s) {
    def.summary = s.str();
    return *this;
  }
  OpDefBuilder &roles(OpRoles r) {
    def.roles = std::move(r);
    return *this;
  }

private:
  OpDef &def;
};

/// The process-wide table of op entries.
class OpRegistry {
public:
  /// The registry with every family's entries.
  static const OpRegistry &get();

  /// The entry for `name` in `domain` ("" and "ai.onnx" are one domain)
  /// that applies at `opset`: the one with the largest since-opset <=
  /// `opset`. `opset` < 0 means the newest entry. Null when none.
  const OpDef *lookup(llvm::StringRef domain, llvm::StringRef name,
                      int opset = -1) const;
  /// lookup() for an oasr.node.
  const OpDef *lookup(mlir::oasr::NodeOp node, int opset = -1) const;
  /// True when the newest entry of `name` (default domain) has `trait`.
  bool hasTrait(llvm::StringRef name, OpTrait trait) const;

  /// Every entry, sorted by (domain, name, since).
  llvm::ArrayRef<OpDef> all() const { return defs; }

  /// Starts an entry (used by the family files).
  OpDefBuilder add(llvm::StringRef name, int since = 1,
                   llvm::StringRef domain = "");

  /// The supported-op table of docs/generated/Ops.md.
  void printMarkdown(llvm::raw_ostream &os) const;

private:
  OpRegistry() = default;
  std::vector<OpDef> defs;
};

/// FLOPs and bytes of one oasr.node: its entry's cost rule, else one
/// operation per result element and every operand and used result moved.
Work analyticCost(mlir::oasr::NodeOp node);

/// Entries per family (lib/Ops).
void registerArithmeticOps(OpRegistry &r);
void registerNNOps(OpRegistry &r);
void registerShapeOps(OpRegistry &r);
void registerIndexOps(OpRegistry &r);
void registerFunctionOps(OpRegistry &r);

} // namespace oasr::ops

#endif // OASR_OPS_OPREGISTRY_H
