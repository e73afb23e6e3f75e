//===- ORTCheckpoint.h - ONNX Runtime training checkpoints ------*- C++ -*-===//
//
// The `checkpoint` file onnxruntime-training writes beside its training
// artifacts (generate_artifacts, CheckpointState.save_checkpoint): a
// FlatBuffer (identifier "ODTC") holding the trainable and frozen parameters,
// optionally the optimizer's state (per parameter AdamW's "momentum0" and
// "momentum1", and the group's step count) and a property bag. Read and
// written natively with flatbuffers (lib/Import/ORTCheckpoint.fbs, the tables
// of ORT's published schema oasr uses). Plain C++ and LLVM Support: no MLIR,
// no protobuf.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_IMPORT_ORTCHECKPOINT_H
#define OASR_IMPORT_ORTCHECKPOINT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace oasr {
namespace ort {

/// The checkpoint format version ORT 1.19 writes (and the newest oasr
/// reads); version 1 lacks the module state's flags and reads the same.
inline constexpr int32_t kCheckpointVersion = 2;
/// ORT's names for AdamW's first and second moments.
inline constexpr llvm::StringLiteral kMomentum0 = "momentum0";
inline constexpr llvm::StringLiteral kMomentum1 = "momentum1";

/// One tensor: its name, dims, ONNX data type and raw little-endian bytes.
/// Read from a checkpoint, `bytes` points into the file's buffer and
/// `offset` is where they start in the file.
struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> dims;
  int32_t dataType = 0; ///< ONNX TensorProto.DataType (1: FLOAT)
  llvm::ArrayRef<uint8_t> bytes;
  uint64_t offset = 0;
  int64_t numElements() const;
};

/// One parameter's optimizer state.
struct ParameterOptimizerState {
  std::string param;
  std::vector<CheckpointTensor> momentums;
  /// The momentum called `name`, or null.
  const CheckpointTensor *find(llvm::StringRef name) const;
};

/// An optimizer group (ORT writes one, "group0").
struct OptimizerGroup {
  std::string name;
  int64_t step = 0; ///< optimizer steps taken
  float initialLearningRate = 0;
  std::vector<ParameterOptimizerState> states;
  const ParameterOptimizerState *find(llvm::StringRef param) const;
};

/// The user's properties (epoch, best score, ...), kept as they are.
struct PropertyBag {
  std::vector<std::pair<std::string, int64_t>> ints;
  std::vector<std::pair<std::string, float>> floats;
  std::vector<std::pair<std::string, std::string>> strings;
};

/// A checkpoint's content. Written by `serializeCheckpoint`; read by
/// `readCheckpoint`, whose result owns the file's bytes the tensors point to.
struct CheckpointContent {
  int32_t version = kCheckpointVersion;
  std::vector<CheckpointTensor> trainable, frozen;
  std::vector<OptimizerGroup> optimizerGroups;
  PropertyBag properties;
  /// A trainable or frozen tensor called `name`, or null.
  const CheckpointTensor *find(llvm::StringRef name) const;
};

class Checkpoint : public CheckpointContent {
public:
  std::string path;

private:
  friend llvm::Expected<Checkpoint> readCheckpoint(llvm::StringRef path);
  std::shared_ptr<llvm::MemoryBuffer> buffer;
};

/// Reads and verifies `path` (flatbuffers' Verifier, then every tensor's
/// byte count against its dims and type). Errors start with the path: a
/// missing or unreadable file, a file that is not an ORT checkpoint (no
/// "ODTC" identifier), one truncated or corrupt, a newer format version, a
/// nominal checkpoint (names without values) or one whose data lies in an
/// external file.
llvm::Expected<Checkpoint> readCheckpoint(llvm::StringRef path);

/// The checkpoint as the bytes of an ORT checkpoint file.
std::string serializeCheckpoint(const CheckpointContent &content);

} // namespace ort
} // namespace oasr

#endif // OASR_IMPORT_ORTCHECKPOINT_H
