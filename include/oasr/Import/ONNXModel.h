//===- ONNXModel.h - A loaded ONNX model with lazy weights ------*- C++ -*-===//
//
// Loading ONNX ModelProtos (binary, text or JSON) without copying their
// weights, reading initializers on demand (inline, typed fields or external
// data), and writing a model back with new initializer values. No MLIR here:
// the runtime uses this to read and save weights.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_IMPORT_ONNXMODEL_H
#define OASR_IMPORT_ONNXMODEL_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace llvm {
class MemoryBuffer;
} // namespace llvm

namespace oasr {
namespace onnximport {

/// ONNX `TensorProto::DataType` values used across oasr.
enum class DataType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
};

/// Size in bytes of one element of `type`, or 0 for types without a fixed
/// size (string, undefined, unknown values).
size_t getElementSize(int32_t type);

/// A printable name for an ONNX data type ("FLOAT", "INT64", ...).
llvm::StringRef getDataTypeName(int32_t type);

/// The contents of one initializer: raw little-endian bytes, dims and type.
struct InitializerData {
  /// The initializer's name.
  std::string name;
  /// Its dimensions (empty for a scalar).
  std::vector<int64_t> dims;
  /// Its ONNX data type (`onnx::TensorProto::DataType`).
  int32_t dataType = 0;
  /// The bytes, `numElements() * getElementSize(dataType)` of them. They point
  /// into the mapped model or side file (zero copy) or into `storage`; valid
  /// as long as both this object and the ModelFile live.
  llvm::ArrayRef<uint8_t> bytes;
  /// Owns the bytes when they had to be converted (typed `*_data` fields).
  std::vector<uint8_t> storage;

  /// Number of elements (product of dims; 1 for a scalar).
  int64_t numElements() const;
  /// The bytes viewed as `T` (caller checks `dataType`).
  template <typename T> llvm::ArrayRef<T> as() const {
    return llvm::ArrayRef<T>(reinterpret_cast<const T *>(bytes.data()),
                             bytes.size() / sizeof(T));
  }
};

/// Where the bytes of one initializer live.
struct InitializerLocation {
  enum Kind {
    /// `raw_data` inside the model file, kept out of proto() (see below).
    InFile,
    /// `raw_data` or typed `*_data` fields inside proto().
    Inline,
    /// A side file (`data_location = EXTERNAL`).
    External,
  };
  Kind kind = Inline;
  /// For InFile: byte offset of the data in the model file. For External:
  /// the `offset` key (0 when absent).
  uint64_t offset = 0;
  /// Number of bytes (for External: the `length` key, or -1 when absent,
  /// meaning "to the end of the file").
  int64_t length = 0;
  /// For External: the side file, resolved against the model's directory
  /// (canonical when it exists; always inside that directory).
  std::string path;
};

/// A loaded ONNX ModelProto with external data resolved lazily.
///
/// Binary models are scanned once through a small read window: large
/// `raw_data` of the main graph's initializers is skipped and recorded by
/// offset, so proto() holds the graph, dims and types but not the big weights
/// (such an initializer has no data fields in proto(); use readInitializer,
/// which maps the file on first use). Loading a model therefore costs time
/// and memory proportional to its graph, not its weights.
class ModelFile {
public:
  ~ModelFile();
  ModelFile(const ModelFile &) = delete;
  ModelFile &operator=(const ModelFile &) = delete;

  /// Loads a binary ModelProto, a text ModelProto (`.txtpb`, `.textproto`,
  /// `.pbtxt`, `.prototxt`, `.txt`) or a JSON ModelProto (`.json`). Errors
  /// name the file.
  static llvm::Expected<std::unique_ptr<ModelFile>> load(llvm::StringRef path);

  /// Whether `path` holds an ONNX model rather than an MLIR module: the one
  /// rule oasr-opt, oasr-run and oasr-translate share. `.mlir`/`.mlirbc` are
  /// MLIR; `.onnx`, `.txtpb`, `.textproto`, `.pbtxt`, `.prototxt` are ONNX;
  /// any other name (`.json`, `.txt`, none) is decided by its first bytes:
  /// a JSON object, a ModelProto text field, or binary protobuf is ONNX,
  /// anything else MLIR. A file that cannot be read counts as ONNX when its
  /// name says nothing (the loader then names the error).
  static bool isONNX(llvm::StringRef path);

  /// Parses a ModelProto already in memory (binary, or text/JSON when
  /// `format` is "text"/"json"); `path` names it in errors and resolves
  /// external data.
  static llvm::Expected<std::unique_ptr<ModelFile>>
  loadFromBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                 llvm::StringRef path, llvm::StringRef format = "binary");

  /// The model, with big in-file initializer data left out (see above).
  const onnx::ModelProto &proto() const;
  /// Mutable access for tools that edit the graph before importing.
  onnx::ModelProto &mutableProto();
  /// The absolute path the model was loaded from.
  llvm::StringRef path() const;
  /// The directory external data is resolved against.
  llvm::StringRef directory() const;

  /// The main graph's initializer called `name`, or null.
  const onnx::TensorProto *findInitializer(llvm::StringRef name) const;
  /// Appends an initializer to the main graph (findInitializer finds it).
  void addInitializer(onnx::TensorProto tensor);
  /// Where the bytes of initializer `name` live, or an error if there is no
  /// such initializer.
  llvm::Expected<InitializerLocation>
  getInitializerLocation(llvm::StringRef name) const;
  /// Checks an external initializer's `location` against ONNX's rule (a
  /// relative path that stays inside the model's directory, also through
  /// symbolic links) and, when `checkFile`, that the side file exists and
  /// holds the bytes its dims and type need, without reading them.
  llvm::Error checkExternalData(const onnx::TensorProto &tensor,
                                bool checkFile = true) const;

  /// Raw little-endian bytes of a named initializer (raw_data, typed *_data
  /// fields, or external data), with its dims and ONNX data type. Errors
  /// name the model, the initializer and, for external data, the side file.
  llvm::Expected<InitializerData> readInitializer(llvm::StringRef name) const;
  /// The same for a tensor proto of this model (e.g. a Constant's value).
  llvm::Expected<InitializerData>
  readTensor(const onnx::TensorProto &tensor) const;

  /// Writes the model back as one binary ModelProto (all data inline) with
  /// the given float initializers replaced (used by `oasr-run --save`); other
  /// ONNX tools load the result. Every name must be an existing FLOAT
  /// initializer with as many elements as the vector; every name in `counts`
  /// an INT64 scalar initializer (ONNX's update count T).
  llvm::Error
  saveWithInitializers(llvm::StringRef path,
                       const std::map<std::string, std::vector<float>> &values,
                       const std::map<std::string, int64_t> &counts = {}) const;

  /// Opaque implementation state.
  struct Impl;

private:
  ModelFile();
  std::unique_ptr<Impl> impl;
};

/// Why `model` is an inference graph that training would turn into another
/// network, or empty when nothing says so. PyTorch's exporters fold
/// BatchNormalization away for inference:
///  - the dynamo exporter (torch.onnx.export's default since torch 2.9;
///    producer "pytorch", IR version >= 10 or opset >= 18) leaves
///    convolutions without any normalisation after them;
///  - the TorchScript exporter in eval mode fuses Conv and BatchNormalization
///    into convolutions whose weights and biases it names "onnx::Conv_N".
/// A network without BatchNormalization exported for training (weights
/// named after its modules, or no convolutions) is not one.
std::string inferenceGraphReason(const onnx::ModelProto &model);

} // namespace onnximport
} // namespace oasr

#endif // OASR_IMPORT_ONNXMODEL_H
