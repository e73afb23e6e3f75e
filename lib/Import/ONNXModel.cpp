//===- ONNXModel.cpp - A loaded ONNX model with lazy weights --------------===//
//
// Binary models are memory-mapped and rewritten once at the wire level: the
// big `raw_data` fields of the main graph's initializers are cut out (their
// file offsets recorded) before protobuf parses the rest, so loading costs
// time and memory proportional to the graph, not to the weights. Text and
// JSON models (small, for tests) are parsed as they are.
//
//===----------------------------------------------------------------------===//

#include "oasr/Import/ONNXModel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <google/protobuf/io/tokenizer.h>

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <onnx/onnx_pb.h>
#include <optional>

#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace oasr::onnximport;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;

/// In-file `raw_data` at least this long stays in the mapped file.
static constexpr uint64_t kStripThreshold = 256;

static Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Data types
//===----------------------------------------------------------------------===//

size_t oasr::onnximport::getElementSize(int32_t type) {
  switch (static_cast<DataType>(type)) {
  case DataType::Float:
  case DataType::Int32:
  case DataType::UInt32:
    return 4;
  case DataType::UInt8:
  case DataType::Int8:
  case DataType::Bool:
    return 1;
  case DataType::UInt16:
  case DataType::Int16:
  case DataType::Float16:
  case DataType::BFloat16:
    return 2;
  case DataType::Int64:
  case DataType::Double:
  case DataType::UInt64:
  case DataType::Complex64:
    return 8;
  case DataType::Complex128:
    return 16;
  default:
    return 0;
  }
}

StringRef oasr::onnximport::getDataTypeName(int32_t type) {
  if (onnx::TensorProto_DataType_IsValid(type))
    return onnx::TensorProto_DataType_Name(
        static_cast<onnx::TensorProto_DataType>(type));
  return "<invalid data type>";
}

int64_t InitializerData::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

//===----------------------------------------------------------------------===//
// Wire-level rewriting of binary models
//===----------------------------------------------------------------------===//

namespace {
/// Bytes of a serialized model: in memory, or read from a file on demand
/// (so that the weights the scan skips are never read or mapped).
class ByteSource {
public:
  /// In-memory bytes.
  ByteSource(const uint8_t *base, uint64_t size) : base(base), size(size) {}
  /// A file read with pread through a small window.
  ByteSource(int fd, uint64_t size) : size(size), fd(fd) {}

  uint64_t getSize() const { return size; }

  /// The byte at `pos` (< size).
  uint8_t at(uint64_t pos) {
    if (base)
      return base[pos];
    if (pos < windowStart || pos >= windowStart + window.size())
      fill(pos);
    return uint8_t(window[pos - windowStart]);
  }

  /// Appends bytes [pos, pos + n) to `out`; false on a read error.
  bool append(uint64_t pos, uint64_t n, std::string &out) {
    if (base) {
      out.append(reinterpret_cast<const char *>(base + pos), n);
      return true;
    }
    if (pos >= windowStart && pos + n <= windowStart + window.size()) {
      out.append(window, pos - windowStart, n);
      return true;
    }
    size_t old = out.size();
    out.resize(old + n);
    return readAt(pos, &out[old], n);
  }

  bool failed = false;

private:
  static constexpr uint64_t kWindow = 64 * 1024;

  bool readAt(uint64_t pos, char *into, uint64_t n) {
    while (n) {
      ssize_t got = ::pread(fd, into, n, off_t(pos));
      if (got <= 0) {
        failed = true;
        std::memset(into, 0, n);
        return false;
      }
      into += got;
      pos += uint64_t(got);
      n -= uint64_t(got);
    }
    return true;
  }

  void fill(uint64_t pos) {
    windowStart = pos;
    window.resize(std::min(kWindow, size - pos));
    readAt(pos, window.data(), window.size());
  }

  const uint8_t *base = nullptr;
  uint64_t size;
  int fd = -1;
  std::string window;
  uint64_t windowStart = 0;
};

/// Copies a serialized ModelProto while cutting big initializer raw_data out.
class WireStripper {
public:
  explicit WireStripper(ByteSource &source)
      : source(source), size(source.getSize()) {}

  /// Rewrites the whole file; returns false on malformed input, with
  /// `errorOffset` the byte where it went wrong.
  bool run(std::string &out) { return rewrite(0, size, Level::Model, out); }

  uint64_t errorOffset = 0;
  std::string errorWhat;
  /// Initializer name -> (offset, length) of its raw_data in the file.
  llvm::StringMap<std::pair<uint64_t, uint64_t>> stripped;

private:
  enum class Level { Model, Graph, Tensor };

  bool fail(uint64_t at, const char *what) {
    errorOffset = at;
    errorWhat = what;
    return false;
  }

  bool readVarint(uint64_t &pos, uint64_t end, uint64_t &value) {
    value = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (pos >= end)
        return fail(pos, "truncated varint");
      uint8_t byte = source.at(pos++);
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return true;
    }
    return fail(pos, "varint longer than 10 bytes");
  }

  static void writeVarint(std::string &out, uint64_t value) {
    while (value >= 0x80) {
      out.push_back(char(value | 0x80));
      value >>= 7;
    }
    out.push_back(char(value));
  }

  bool rewrite(uint64_t pos, uint64_t end, Level level, std::string &out) {
    std::string tensorName;
    std::pair<uint64_t, uint64_t> rawData{0, 0};
    bool cut = false;
    while (pos < end) {
      uint64_t fieldStart = pos, tag;
      if (!readVarint(pos, end, tag))
        return false;
      uint64_t field = tag >> 3, wireType = tag & 7;
      if (field == 0)
        return fail(fieldStart, "field number 0");
      switch (wireType) {
      case 0: { // varint
        uint64_t ignored;
        if (!readVarint(pos, end, ignored))
          return false;
        break;
      }
      case 1: // fixed64
        if (end - pos < 8)
          return fail(pos, "truncated fixed64");
        pos += 8;
        break;
      case 5: // fixed32
        if (end - pos < 4)
          return fail(pos, "truncated fixed32");
        pos += 4;
        break;
      case 2: { // length-delimited
        uint64_t length;
        if (!readVarint(pos, end, length))
          return false;
        if (length > end - pos)
          return fail(pos, "length-delimited field runs past the end");
        uint64_t dataStart = pos;
        pos += length;
        bool descend = (level == Level::Model && field == 7) ||
                       (level == Level::Graph && field == 5);
        if (descend) {
          std::string sub;
          if (!rewrite(dataStart, pos,
                       descend && level == Level::Model ? Level::Graph
                                                        : Level::Tensor,
                       sub))
            return false;
          writeVarint(out, tag);
          writeVarint(out, sub.size());
          out += sub;
          continue;
        }
        if (level == Level::Tensor && field == 8)
          tensorName.clear(), source.append(dataStart, length, tensorName);
        if (level == Level::Tensor && field == 9 && length >= kStripThreshold) {
          rawData = {dataStart, length};
          cut = true;
          continue;
        }
        break;
      }
      default:
        return fail(fieldStart, "unsupported wire type");
      }
      if (!source.append(fieldStart, pos - fieldStart, out))
        return fail(fieldStart, "read error");
    }
    if (pos != end)
      return fail(end, "field runs past its message");
    if (cut)
      stripped[tensorName] = rawData;
    return true;
  }

  ByteSource &source;
  uint64_t size;
};
} // namespace

//===----------------------------------------------------------------------===//
// ModelFile
//===----------------------------------------------------------------------===//

struct ModelFile::Impl {
  std::string path, directory;
  onnx::ModelProto proto;
  /// The binary model file, mapped on the first read of an initializer
  /// whose raw_data was left in it (null until then, and for text/JSON).
  mutable std::unique_ptr<llvm::MemoryBuffer> file;
  llvm::StringMap<std::pair<uint64_t, uint64_t>> stripped;
  llvm::StringMap<int> initializerIndex;
  /// Mapped side files, by resolved path.
  mutable std::mutex sideFilesMutex;
  mutable llvm::StringMap<std::unique_ptr<llvm::MemoryBuffer>> sideFiles;

  Expected<const llvm::MemoryBuffer *> getSideFile(StringRef sidePath,
                                                   StringRef tensor) const;
  Expected<const llvm::MemoryBuffer *> getModelFile() const {
    std::lock_guard<std::mutex> lock(sideFilesMutex);
    if (!file) {
      auto buffer = llvm::MemoryBuffer::getFile(
          path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
      if (!buffer)
        return makeError(path + ": cannot map: " + buffer.getError().message());
      file = std::move(*buffer);
    }
    return file.get();
  }
};

ModelFile::ModelFile() : impl(std::make_unique<Impl>()) {}
ModelFile::~ModelFile() = default;

const onnx::ModelProto &ModelFile::proto() const { return impl->proto; }
onnx::ModelProto &ModelFile::mutableProto() { return impl->proto; }
StringRef ModelFile::path() const { return impl->path; }
StringRef ModelFile::directory() const { return impl->directory; }

/// The first non-blank bytes of `path` (at most 512), or None when it
/// cannot be read.
static std::optional<std::string> fileHead(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFileSlice(path, 512, 0);
  if (!buffer)
    buffer = llvm::MemoryBuffer::getFile(path); // shorter than 512 bytes
  if (!buffer)
    return std::nullopt;
  return (*buffer)->getBuffer().ltrim().str();
}

/// A ModelProto's format by its first bytes: "json" (an object), "text"
/// (printable), else "binary".
static StringRef sniffFormat(StringRef head) {
  if (head.starts_with("{"))
    return "json";
  if (!head.empty() && (unsigned char)head.front() >= 0x20 &&
      (unsigned char)head.front() < 0x80)
    return "text";
  return "binary";
}

bool ModelFile::isONNX(StringRef path) {
  StringRef ext = llvm::sys::path::extension(path);
  if (ext.equals_insensitive(".mlir") || ext.equals_insensitive(".mlirbc"))
    return false;
  for (StringRef onnx :
       {".onnx", ".txtpb", ".textproto", ".pbtxt", ".prototxt"})
    if (ext.equals_insensitive(onnx))
      return true;
  std::optional<std::string> headOr = fileHead(path);
  if (!headOr)
    return true; // the loader names the error
  StringRef head = *headOr;
  if (head.empty())
    return false;
  // JSON (MLIR never starts with a brace) or binary protobuf.
  if (sniffFormat(head) != "text")
    return true;
  for (StringRef field :
       {"ir_version", "opset_import", "producer_name", "producer_version",
        "domain", "model_version", "doc_string", "graph", "metadata_props",
        "training_info", "functions"})
    if (head.starts_with(field)) {
      StringRef rest = head.drop_front(field.size()).ltrim();
      if (rest.starts_with(":") || rest.starts_with("{"))
        return true;
    }
  return false;
}

static std::string getFormat(StringRef path) {
  StringRef ext = llvm::sys::path::extension(path);
  if (ext.equals_insensitive(".json"))
    return "json";
  if (ext.equals_insensitive(".txtpb") ||
      ext.equals_insensitive(".textproto") ||
      ext.equals_insensitive(".pbtxt") || ext.equals_insensitive(".prototxt") ||
      ext.equals_insensitive(".txt"))
    return "text";
  if (ext.equals_insensitive(".onnx") || ext.equals_insensitive(".pb"))
    return "binary";
  // No telling extension: by the first bytes.
  std::optional<std::string> head = fileHead(path);
  return head ? sniffFormat(*head).str() : "binary";
}

/// Parses a binary ModelProto from `source`, leaving big initializer
/// raw_data where it is (recorded in `impl.stripped`).
static Error parseBinary(ModelFile::Impl &impl, ByteSource &source);

Expected<std::unique_ptr<ModelFile>> ModelFile::load(StringRef path) {
  llvm::SmallString<256> absolute(path);
  if (std::error_code ec = llvm::sys::fs::make_absolute(absolute))
    return makeError(path + ": " + ec.message());
  llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
  std::string format = getFormat(path);
  if (format != "binary") {
    auto buffer = llvm::MemoryBuffer::getFile(absolute, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
    if (!buffer)
      return makeError(llvm::Twine(absolute) +
                       ": cannot open: " + buffer.getError().message());
    return loadFromBuffer(std::move(*buffer), absolute, format);
  }
  // Binary models are read through a small window, skipping the weights:
  // loading touches the graph only. The file is mapped later, when (and if)
  // an initializer is read.
  int fd;
  if (std::error_code ec = llvm::sys::fs::openFileForRead(absolute, fd))
    return makeError(llvm::Twine(absolute) + ": cannot open: " + ec.message());
  uint64_t size = 0;
  std::error_code ec = llvm::sys::fs::file_size(absolute, size);
  std::unique_ptr<ModelFile> model(new ModelFile());
  Impl &impl = *model->impl;
  impl.path = std::string(absolute);
  impl.directory = llvm::sys::path::parent_path(absolute).str();
  Error err = Error::success();
  if (ec) {
    err = makeError(llvm::Twine(absolute) + ": cannot open: " + ec.message());
  } else {
    ByteSource source(fd, size);
    err = parseBinary(impl, source);
  }
  ::close(fd);
  if (err)
    return std::move(err);
  return std::move(model);
}

static Error finishLoad(ModelFile::Impl &impl) {
  if (!impl.proto.has_graph() || impl.proto.ir_version() <= 0)
    return makeError(impl.path +
                     ": not an ONNX model (no ir_version or graph)");
  const onnx::GraphProto &graph = impl.proto.graph();
  for (int i = 0, e = graph.initializer_size(); i < e; ++i)
    impl.initializerIndex[graph.initializer(i).name()] = i;
  return Error::success();
}

static Error parseBinary(ModelFile::Impl &impl, ByteSource &source) {
  const std::string &path = impl.path;
  if (source.getSize() == 0)
    return makeError(path + ": not an ONNX protobuf: the file is empty");
  WireStripper stripper(source);
  std::string graphOnly;
  if (!stripper.run(graphOnly))
    return makeError(llvm::formatv(
        "{0}: not an ONNX protobuf (truncated or corrupt: {1} at byte {2} "
        "of {3})",
        path, stripper.errorWhat, stripper.errorOffset, source.getSize()));
  if (source.failed)
    return makeError(path + ": read error");
  if (!impl.proto.ParseFromString(graphOnly))
    return makeError(path + ": not an ONNX protobuf (the ModelProto does "
                            "not parse)");
  impl.stripped = std::move(stripper.stripped);
  return finishLoad(impl);
}

Expected<std::unique_ptr<ModelFile>>
ModelFile::loadFromBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                          StringRef path, StringRef format) {
  std::unique_ptr<ModelFile> model(new ModelFile());
  Impl &impl = *model->impl;
  impl.path = path.str();
  impl.directory = llvm::sys::path::parent_path(path).str();
  StringRef data = buffer->getBuffer();

  if (format == "text") {
    google::protobuf::TextFormat::Parser parser;
    struct Collector : google::protobuf::io::ErrorCollector {
      std::string message;
      void AddError(int line, int column, const std::string &msg) override {
        if (message.empty())
          message = llvm::formatv("line {0}, column {1}: {2}", line + 1,
                                  column + 1, msg);
      }
    } collector;
    parser.RecordErrorsTo(&collector);
    google::protobuf::io::ArrayInputStream stream(data.data(), data.size());
    if (!parser.Parse(&stream, &impl.proto))
      return makeError(path + ": not a text ModelProto: " + collector.message);
  } else if (format == "json") {
    auto status = google::protobuf::util::JsonStringToMessage(std::string(data),
                                                              &impl.proto);
    if (!status.ok())
      return makeError(
          path + ": not a JSON ModelProto: " + std::string(status.message()));
  } else {
    ByteSource source(reinterpret_cast<const uint8_t *>(data.data()),
                      data.size());
    if (Error err = parseBinary(impl, source))
      return std::move(err);
    impl.file = std::move(buffer);
    return std::move(model);
  }
  if (Error err = finishLoad(impl))
    return std::move(err);
  return std::move(model);
}

const onnx::TensorProto *ModelFile::findInitializer(StringRef name) const {
  auto it = impl->initializerIndex.find(name);
  if (it == impl->initializerIndex.end())
    return nullptr;
  return &impl->proto.graph().initializer(it->second);
}

void ModelFile::addInitializer(onnx::TensorProto tensor) {
  onnx::GraphProto *graph = impl->proto.mutable_graph();
  impl->initializerIndex[tensor.name()] = graph->initializer_size();
  *graph->add_initializer() = std::move(tensor);
}

/// Number of bytes a tensor's dims and type call for, or -1 on overflow or
/// for a type without a fixed size.
static int64_t getExpectedBytes(const onnx::TensorProto &tensor) {
  size_t elementSize = getElementSize(tensor.data_type());
  if (!elementSize)
    return -1;
  uint64_t n = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0 || (d && n > (uint64_t(1) << 62) / uint64_t(d)))
      return -1;
    n *= uint64_t(d);
  }
  return int64_t(n * elementSize);
}

namespace {
struct ExternalKeys {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
};
} // namespace

static Expected<ExternalKeys> getExternalKeys(const onnx::TensorProto &tensor,
                                              StringRef modelPath) {
  ExternalKeys keys;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    StringRef value = entry.value();
    if (entry.key() == "location") {
      keys.location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      uint64_t number;
      if (value.getAsInteger(10, number))
        return makeError(modelPath + ": initializer '" + tensor.name() +
                         "': external data key '" + entry.key() +
                         "' is not a number: '" + value + "'");
      if (entry.key() == "offset")
        keys.offset = number;
      else
        keys.length = int64_t(number);
    }
  }
  if (keys.location.empty())
    return makeError(modelPath + ": initializer '" + tensor.name() +
                     "': external data without a 'location'");
  return keys;
}

/// Resolves an external initializer's `location` against the model's
/// directory under ONNX's rule for external data (onnx/checker.cc,
/// resolve_external_data_location): the location is a relative path that,
/// once normalized, has no `..` component, and the file it names resolves
/// (following symbolic links) to a regular file inside the model's
/// directory. Returns the resolved path: the canonical one when the file
/// exists, else the lexical one (whoever opens it reports it missing).
static Expected<std::string> resolveSidePath(StringRef modelPath,
                                             StringRef directory,
                                             const onnx::TensorProto &tensor,
                                             StringRef location) {
  auto error = [&](const llvm::Twine &what) {
    return makeError(modelPath + ": initializer '" + tensor.name() +
                     "': external data location '" + location + "' " + what);
  };
  if (location.contains('\0'))
    return error("contains a NUL character");
  if (llvm::sys::path::is_absolute(location) ||
      llvm::sys::path::has_root_name(location))
    return error("is an absolute path; ONNX requires a path relative to the "
                 "model's directory '" +
                 directory + "'");
  llvm::SmallString<256> relative(location);
  llvm::sys::path::remove_dots(relative, /*remove_dot_dot=*/true);
  for (StringRef component : llvm::make_range(llvm::sys::path::begin(relative),
                                              llvm::sys::path::end(relative)))
    if (component == "..")
      return error("leaves the model's directory '" + directory + "'");
  if (relative.empty() || relative == ".")
    return error("does not name a file inside the model's directory '" +
                 directory + "'");
  llvm::SmallString<256> side(directory);
  llvm::sys::path::append(side, relative);

  // Through symbolic links (of the file or of a directory on the way), the
  // file must still be inside the model's directory.
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(side, status, /*follow=*/false))
    return side.str().str();
  llvm::SmallString<256> realSide, realDirectory;
  if (std::error_code ec = llvm::sys::fs::real_path(side, realSide))
    return error("cannot be resolved: " + ec.message());
  if (std::error_code ec = llvm::sys::fs::real_path(directory, realDirectory))
    return makeError(modelPath + ": the model's directory '" + directory +
                     "' cannot be resolved: " + ec.message());
  StringRef real = realSide;
  if (!real.starts_with(realDirectory) || real.size() <= realDirectory.size() ||
      !llvm::sys::path::is_separator(real[realDirectory.size()]))
    return error("resolves to '" + realSide +
                 "', outside the model's directory '" + realDirectory + "'");
  llvm::sys::fs::file_status target;
  if (std::error_code ec = llvm::sys::fs::status(realSide, target))
    return error("cannot be resolved: " + ec.message());
  if (target.type() != llvm::sys::fs::file_type::regular_file)
    return error("is not a regular file");
  return realSide.str().str();
}

Expected<InitializerLocation>
ModelFile::getInitializerLocation(StringRef name) const {
  const onnx::TensorProto *tensor = findInitializer(name);
  if (!tensor)
    return makeError(impl->path + ": no initializer named '" + name + "'");
  InitializerLocation location;
  auto cut = impl->stripped.find(name);
  if (cut != impl->stripped.end()) {
    location.kind = InitializerLocation::InFile;
    location.offset = cut->second.first;
    location.length = int64_t(cut->second.second);
    location.path = impl->path;
    return location;
  }
  if (tensor->data_location() == onnx::TensorProto::EXTERNAL) {
    auto keys = getExternalKeys(*tensor, impl->path);
    if (!keys)
      return keys.takeError();
    auto side =
        resolveSidePath(impl->path, impl->directory, *tensor, keys->location);
    if (!side)
      return side.takeError();
    location.kind = InitializerLocation::External;
    location.offset = keys->offset;
    location.length = keys->length;
    location.path = std::move(*side);
    return location;
  }
  location.kind = InitializerLocation::Inline;
  location.length = getExpectedBytes(*tensor);
  return location;
}

Expected<const llvm::MemoryBuffer *>
ModelFile::Impl::getSideFile(StringRef sidePath, StringRef tensor) const {
  std::lock_guard<std::mutex> lock(sideFilesMutex);
  auto it = sideFiles.find(sidePath);
  if (it != sideFiles.end())
    return it->second.get();
  auto cannotOpen = [&](std::error_code ec) {
    return makeError(path + ": initializer '" + tensor +
                     "': external data file '" + sidePath +
                     "' cannot be opened: " + ec.message());
  };
  // `sidePath` was resolved (resolveSidePath); O_NOFOLLOW and the checks on
  // the open descriptor keep a link swapped in since then from being read.
  int fd = ::open(sidePath.str().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return cannotOpen(std::error_code(errno, std::generic_category()));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError(path + ": initializer '" + tensor +
                     "': external data file '" + sidePath +
                     "' is not a regular file");
  }
  auto buffer = llvm::MemoryBuffer::getOpenFile(
      llvm::sys::fs::convertFDToNativeFile(fd), sidePath, uint64_t(st.st_size),
      /*RequiresNullTerminator=*/false);
  ::close(fd);
  if (!buffer)
    return cannotOpen(buffer.getError());
  const llvm::MemoryBuffer *result = buffer->get();
  sideFiles[sidePath] = std::move(*buffer);
  return result;
}

Error ModelFile::checkExternalData(const onnx::TensorProto &tensor,
                                   bool checkFile) const {
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
    return Error::success();
  auto keys = getExternalKeys(tensor, impl->path);
  if (!keys)
    return keys.takeError();
  auto resolved =
      resolveSidePath(impl->path, impl->directory, tensor, keys->location);
  if (!resolved)
    return resolved.takeError();
  if (!checkFile)
    return Error::success();
  StringRef side = *resolved;
  uint64_t fileSize;
  if (std::error_code ec = llvm::sys::fs::file_size(side, fileSize))
    return makeError(impl->path + ": initializer '" + tensor.name() +
                     "': external data file '" + side +
                     "' cannot be opened: " + ec.message());
  int64_t expected = getExpectedBytes(tensor);
  int64_t length = keys->length >= 0 ? keys->length : expected;
  if (expected >= 0 && keys->length >= 0 && keys->length != expected)
    return makeError(llvm::formatv(
        "{0}: initializer '{1}': external data length {2} does not match its "
        "dims and type ({3} bytes)",
        impl->path, tensor.name(), keys->length, expected));
  if (length < 0 || keys->offset + uint64_t(length) > fileSize)
    return makeError(llvm::formatv(
        "{0}: initializer '{1}': external data file '{2}' is too short: it has "
        "{3} bytes, the initializer needs bytes [{4}, {5})",
        impl->path, tensor.name(), side, fileSize, keys->offset,
        keys->offset + uint64_t(std::max<int64_t>(length, 0))));
  return Error::success();
}

template <typename From, typename To>
static void convertInto(const google::protobuf::RepeatedField<From> &values,
                        std::vector<uint8_t> &storage) {
  storage.resize(values.size() * sizeof(To));
  To *out = reinterpret_cast<To *>(storage.data());
  for (int i = 0, e = values.size(); i < e; ++i)
    out[i] = static_cast<To>(values.Get(i));
}

Expected<InitializerData>
ModelFile::readTensor(const onnx::TensorProto &tensor) const {
  InitializerData data;
  data.name = tensor.name();
  data.dims.assign(tensor.dims().begin(), tensor.dims().end());
  data.dataType = tensor.data_type();
  auto error = [&](const llvm::Twine &what) {
    return makeError(impl->path + ": initializer '" + tensor.name() + "' (" +
                     getDataTypeName(tensor.data_type()) + "): " + what);
  };
  int64_t expected = getExpectedBytes(tensor);
  if (expected < 0)
    return error("unsupported data type or invalid dims");

  auto cut = impl->stripped.find(tensor.name());
  if (cut != impl->stripped.end() &&
      findInitializer(tensor.name()) == &tensor) {
    auto file = impl->getModelFile();
    if (!file)
      return file.takeError();
    if (cut->second.first + cut->second.second > (*file)->getBufferSize())
      return error("the model file changed since it was loaded");
    data.bytes = llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>((*file)->getBufferStart()) +
            cut->second.first,
        cut->second.second);
  } else if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    if (Error err = checkExternalData(tensor))
      return std::move(err);
    auto keys = getExternalKeys(tensor, impl->path);
    if (!keys)
      return keys.takeError();
    auto side =
        resolveSidePath(impl->path, impl->directory, tensor, keys->location);
    if (!side)
      return side.takeError();
    auto file = impl->getSideFile(*side, tensor.name());
    if (!file)
      return file.takeError();
    data.bytes = llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>((*file)->getBufferStart()) +
            keys->offset,
        size_t(expected));
  } else if (tensor.has_raw_data()) {
    data.bytes = llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(tensor.raw_data().data()),
        tensor.raw_data().size());
  } else {
    using DT = DataType;
    switch (static_cast<DT>(tensor.data_type())) {
    case DT::Float:
    case DT::Complex64:
      convertInto<float, float>(tensor.float_data(), data.storage);
      break;
    case DT::Double:
    case DT::Complex128:
      convertInto<double, double>(tensor.double_data(), data.storage);
      break;
    case DT::Int64:
      convertInto<int64_t, int64_t>(tensor.int64_data(), data.storage);
      break;
    case DT::UInt32:
      convertInto<uint64_t, uint32_t>(tensor.uint64_data(), data.storage);
      break;
    case DT::UInt64:
      convertInto<uint64_t, uint64_t>(tensor.uint64_data(), data.storage);
      break;
    case DT::Int32:
      convertInto<int32_t, int32_t>(tensor.int32_data(), data.storage);
      break;
    case DT::Int16:
      convertInto<int32_t, int16_t>(tensor.int32_data(), data.storage);
      break;
    case DT::UInt16:
    case DT::Float16:
    case DT::BFloat16:
      convertInto<int32_t, uint16_t>(tensor.int32_data(), data.storage);
      break;
    case DT::Int8:
      convertInto<int32_t, int8_t>(tensor.int32_data(), data.storage);
      break;
    case DT::UInt8:
    case DT::Bool:
      convertInto<int32_t, uint8_t>(tensor.int32_data(), data.storage);
      break;
    default:
      return error("unsupported data type");
    }
    data.bytes = data.storage;
  }
  if (int64_t(data.bytes.size()) != expected)
    return error(llvm::formatv("holds {0} bytes of data, its dims and type "
                               "need {1}",
                               data.bytes.size(), expected));
  // Bytes inside the mapped file sit wherever protobuf put them; reading
  // them as floats there is a misaligned load (undefined behaviour, caught by
  // UBSan). Such tensors are copied once to aligned storage.
  size_t elem = getElementSize(tensor.data_type());
  if (elem > 1 && data.storage.empty() &&
      reinterpret_cast<uintptr_t>(data.bytes.data()) % elem != 0) {
    data.storage.assign(data.bytes.begin(), data.bytes.end());
    data.bytes = data.storage;
  }
  return std::move(data);
}

Expected<InitializerData> ModelFile::readInitializer(StringRef name) const {
  const onnx::TensorProto *tensor = findInitializer(name);
  if (!tensor)
    return makeError(impl->path + ": no initializer named '" + name + "'");
  return readTensor(*tensor);
}

Error ModelFile::saveWithInitializers(
    StringRef path, const std::map<std::string, std::vector<float>> &values,
    const std::map<std::string, int64_t> &counts) const {
  for (const auto &[name, count] : counts) {
    const onnx::TensorProto *tensor = findInitializer(name);
    if (!tensor || tensor->data_type() != onnx::TensorProto::INT64 ||
        getExpectedBytes(*tensor) != int64_t(sizeof(int64_t)))
      return makeError(impl->path + ": cannot save: '" + name +
                       "' is not an INT64 scalar initializer");
  }
  for (const auto &[name, vector] : values) {
    const onnx::TensorProto *tensor = findInitializer(name);
    if (!tensor)
      return makeError(impl->path + ": cannot save: no initializer named '" +
                       name + "'");
    if (tensor->data_type() != onnx::TensorProto::FLOAT)
      return makeError(impl->path + ": cannot save: initializer '" + name +
                       "' is not FLOAT");
    if (getExpectedBytes(*tensor) != int64_t(vector.size() * sizeof(float)))
      return makeError(llvm::formatv(
          "{0}: cannot save: initializer '{1}' has {2} elements, got {3}",
          impl->path, name, getExpectedBytes(*tensor) / 4, vector.size()));
  }
  onnx::ModelProto copy = impl->proto;
  onnx::GraphProto *graph = copy.mutable_graph();
  for (onnx::TensorProto &tensor : *graph->mutable_initializer()) {
    auto it = values.find(tensor.name());
    auto count = counts.find(tensor.name());
    std::string bytes;
    if (it != values.end()) {
      bytes.assign(reinterpret_cast<const char *>(it->second.data()),
                   it->second.size() * sizeof(float));
    } else if (count != counts.end()) {
      bytes.assign(reinterpret_cast<const char *>(&count->second),
                   sizeof(int64_t)); // little-endian, as raw_data is
    } else if (impl->stripped.count(tensor.name()) ||
               tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      auto data = readTensor(impl->proto.graph().initializer(
          impl->initializerIndex[tensor.name()]));
      if (!data)
        return data.takeError();
      bytes.assign(reinterpret_cast<const char *>(data->bytes.data()),
                   data->bytes.size());
    } else {
      continue; // inline data stays as it is
    }
    tensor.clear_float_data();
    tensor.clear_double_data();
    tensor.clear_int32_data();
    tensor.clear_int64_data();
    tensor.clear_uint64_data();
    tensor.clear_external_data();
    tensor.clear_data_location();
    tensor.set_raw_data(std::move(bytes));
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return makeError(path + ": cannot write: " + ec.message());
  std::string serialized;
  if (!copy.SerializeToString(&serialized))
    return makeError(path + ": cannot serialize the model (over 2 GiB?)");
  os << serialized;
  os.close();
  if (os.has_error())
    return makeError(path + ": write failed: " + os.error().message());
  return Error::success();
}

std::string
oasr::onnximport::inferenceGraphReason(const onnx::ModelProto &model) {
  const onnx::GraphProto &g = model.graph();
  llvm::StringSet<> inits;
  for (const onnx::TensorProto &t : g.initializer())
    inits.insert(t.name());
  auto fused = [&](const onnx::NodeProto &n, int i) {
    return n.input_size() > i && inits.count(n.input(i)) &&
           llvm::StringRef(n.input(i)).starts_with("onnx::Conv_");
  };
  int64_t convs = 0, folded = 0, norms = 0;
  std::string firstFolded;
  for (const onnx::NodeProto &n : g.node()) {
    const std::string &op = n.op_type();
    if (op == "BatchNormalization" || op == "InstanceNormalization" ||
        op == "GroupNormalization" || op == "LayerNormalization")
      ++norms;
    if (op != "Conv")
      continue;
    ++convs;
    if (fused(n, 1) && fused(n, 2) && folded++ == 0)
      firstFolded = n.name().empty() ? n.output(0) : n.name();
  }
  if (folded)
    return llvm::formatv(
               "{0} of its {1} Conv nodes (the first '{2}') read a weight and "
               "bias PyTorch's TorchScript exporter named 'onnx::Conv_N', "
               "which it writes when an eval-mode export fuses "
               "BatchNormalization into the convolution",
               folded, convs, firstFolded)
        .str();
  int64_t opset = 0;
  for (const onnx::OperatorSetIdProto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (model.producer_name() == "pytorch" &&
      (model.ir_version() >= 10 || opset >= 18) && convs && !norms)
    return llvm::formatv(
               "it was written by PyTorch's dynamo exporter (producer "
               "pytorch {0}, opset {1}, IR version {2}), which exports for "
               "inference and folds BatchNormalization away: its {3} Conv "
               "nodes have no normalisation",
               model.producer_version(), opset, model.ir_version(), convs)
        .str();
  return "";
}
