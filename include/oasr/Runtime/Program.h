//===- Program.h - A compiled training step, free of MLIR -------*- C++ -*-===//
//
// What the compiler hands the runtime (IREE's split): the step lowered to
// plain data. Every SSA value of @train_step is a slot with its type and
// where it lives; every op that runs is an instruction on slots; the fused
// groups, the plan's model and its steady-state order come with it.
// `lowerToProgram` (lib/Lower) makes one from a module, `writeProgram` and
// `readProgram` (runtime/ProgramIO.cpp) move it through an `.oasrprog`
// file, and `Executor::create` turns one into kernels and memory on a
// backend. Nothing here depends on the backend: what one backend does
// differently (keeping the weights' 16-bit copies in the update) it decides
// when it loads the program.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_PROGRAM_H
#define OASR_RUNTIME_PROGRAM_H

#include "oasr/Runtime/Executor.h"
#include "oasr/Runtime/Kernel.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace oasr::rt {

/// Alignment of every buffer and gradient offset in a group.
constexpr size_t kAlign = 64;
inline size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// Where a value lives.
enum class Where : uint8_t { Arena, Persistent, Group, Alias };

/// One value slot.
struct ValueInfo {
  TensorDesc desc;
  Where where = Where::Arena;
  int aliasOf = -1;    ///< Where::Alias: the value whose storage it shares
  int persistent = -1; ///< Where::Persistent: index into Program::persist
  int group = -1;      ///< Where::Group
  size_t offset = 0;   ///< group byte offset (and, once placed, arena's)
  int def = -1;        ///< defining instruction (-1: argument / constant)
  int lastUse = -1;    ///< last instruction reading it (computed at load)
  bool used = false;   ///< read by anything (incl. returns)
  bool kernelOutput = false;
  void *ptr = nullptr; ///< resolved address (at load)
};

/// A persistent buffer: an argument (input, label, parameter, state) or a
/// constant, whose bytes `init` holds.
struct PersistBuf {
  TensorDesc desc;
  void *ptr = nullptr; ///< at load
  std::vector<char> init;
};

enum class InstrOp : uint8_t { Kernel, Copy, Start, Wait, Update };

/// One instruction of the step, as compiled.
struct ProgramInstr {
  InstrOp op = InstrOp::Kernel;
  std::vector<int> ins, outs;
  unsigned group = 0;
  /// Copy: pairs of (dst, src) values.
  std::vector<std::pair<int, int>> copies;
  UpdateRule rule; ///< Update: oasr.optimizer_update's algorithm and attributes
  bool elementwise = false; ///< may write its result over a dying input
  bool pack = false;        ///< Copy: gradients into their group buffer
  /// ONNX positions of optional operands left out in the middle
  /// (oasr.absent_inputs): the kernel sees them as TensorRefs without data.
  std::vector<int64_t> absent;
  /// Kernel: the node's op type, name (its location, else its op type),
  /// location ("" when it has none) and attributes.
  std::string opType, name, location;
  AttrMap attrs;
  /// Kernel: a forward Cast of f32 parameter `ins[0]` to bf16/f16 whose
  /// readers all run before the parameter's update, which may keep the
  /// copy instead (KernelBackend::updatesWeightCopies).
  bool paramCopy = false;
  /// Update: the parameter's 16-bit copy it keeps (-1: none); set at load.
  int weightCopy = -1;

  /// `items` (one per operand in `ins`) with `hole` at the absent positions.
  template <typename T>
  std::vector<T> withAbsent(std::vector<T> items, const T &hole) const {
    for (int64_t pos : absent)
      if (pos >= 0 && pos <= int64_t(items.size()))
        items.insert(items.begin() + pos, hole);
    return items;
  }
};

/// Where one gradient (in communication order) lives in the fused groups:
/// the value stored in the group buffer (the producer's output itself, or
/// the slot a pack copy fills) and the allreduce_wait result the optimizer
/// reads (both at the same bytes).
struct GradSlot {
  int slot = -1, wait = -1;
  int readyInstr = -1; ///< the instruction after which it is in the buffer
};

/// One fused group as compiled.
struct ProgramGroup {
  unsigned index = 0;
  std::vector<int> grads;
  std::vector<size_t> offsets;
  std::vector<std::string> gradLayers;
  size_t bytes = 0;
  unsigned powerSgdRank = 0;
  bool twoLevel = false; ///< oasr.allreduce_start's two_level
  std::string layer;
  std::vector<GradSlot> slots;
};

/// A parameter, state or optimizer state tensor of the step's arguments.
struct ProgramTensor {
  PersistentTensor::Kind kind = PersistentTensor::Param;
  std::string name;
  int value = -1;
  /// How seeded random init fills it (from how the step reads it).
  PersistentTensor::Init init = PersistentTensor::Zeros;
  int64_t fanIn = 1;
};

/// A gradient in ready order: (group, position) of its slot.
struct ProgramGradient {
  std::pair<unsigned, unsigned> at;
  std::string param, layer;
  size_t bytes = 0;
  uint64_t rows = 0;
};

struct Program {
  // The module's attributes.
  std::string source, model, precision = "f32", countName, strategy, costs;
  int64_t updatesDone = 0;   ///< an ONNX training model's update count T
  int64_t rebatchedFrom = 0; ///< the static batch --batch replaced (0: none)
  double predictedUs = -1;
  double alphaS = -1, betaS = 0, groupOverheadUs = 0, overlapRate = 1;
  /// What the plan charged compression's compute (oasr.plan's
  /// compress_us_per_mac, compress_us_per_element).
  double compressUsPerMac = 0, compressUsPerElement = 0;
  /// oasr.plan's compress: the policy ("" when off).
  std::string compress;
  Executor::PlanTier tier; ///< `two_level` of oasr.plan
  GradWire wire = GradWire::F32;
  SteadyExecution steady;
  // Values and instructions.
  std::vector<ValueInfo> values;
  std::vector<PersistBuf> persist;
  std::vector<ProgramInstr> instrs;
  std::vector<PlanStepInfo> steps; ///< one per instruction
  int inputValue = -1, labelValue = -1, lossValue = -1, scoresValue = -1;
  int lossScaleValue = -1;
  int64_t inputVocab = 0;
  unsigned forwardEnd = 0; ///< instructions [0, forwardEnd) are the forward
  std::vector<ProgramTensor> tensors;     ///< in argument order
  std::map<std::string, int> gradOfParam; ///< param -> its averaged gradient
  std::vector<ProgramGroup> groups;
  std::vector<ProgramGradient> gradients;
};

} // namespace oasr::rt

#endif // OASR_RUNTIME_PROGRAM_H
