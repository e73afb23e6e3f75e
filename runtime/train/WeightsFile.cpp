//===- WeightsFile.cpp - Trained weights as safetensors -------------------===//

#include "oasr/Runtime/WeightsFile.h"
#include "oasr/Runtime/Executor.h"
#include "oasr/Support/JSON.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <unistd.h>
#include <vector>

namespace oasr::rt {

bool isSafetensorsPath(const std::string &path) {
  return llvm::sys::path::extension(path) == ".safetensors";
}

/// safetensors' name of an element type.
static const char *safetensorsDType(DType t) {
  switch (t) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I64:
    return "I64";
  case DType::I32:
    return "I32";
  case DType::Bool:
    return "BOOL";
  }
  return "F32";
}

namespace {
/// One tensor of the file: a persistent tensor of the executor, or a
/// BatchNorm's `num_batches_tracked` (PyTorch's counter, which ONNX drops).
struct Entry {
  std::string name;
  const PersistentTensor *tensor = nullptr;
  int64_t count = 0; ///< the counter's value when `tensor` is null
  size_t bytes() const { return tensor ? tensor->ref.bytes() : 8; }
};
} // namespace

llvm::Expected<size_t> writeSafetensors(const std::string &path, Executor &exec,
                                        int64_t batchesTracked) {
  // Parameters and buffers by name (the header's order does not matter;
  // sorted, the file is the same for the same weights).
  std::vector<Entry> tensors;
  llvm::StringSet<> names;
  for (const PersistentTensor &t : std::as_const(exec).persistent())
    if (t.kind != PersistentTensor::OptState) {
      tensors.push_back({t.name, &t});
      names.insert(t.name);
    }
  const llvm::StringRef mean = ".running_mean";
  for (size_t k = 0, e = tensors.size(); k < e; ++k) {
    llvm::StringRef name = tensors[k].name;
    if (tensors[k].tensor->kind != PersistentTensor::State ||
        !name.ends_with(mean))
      continue;
    std::string counter =
        name.drop_back(mean.size()).str() + ".num_batches_tracked";
    if (names.insert(counter).second)
      tensors.push_back({counter, nullptr, batchesTracked});
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const Entry &a, const Entry &b) { return a.name < b.name; });
  llvm::json::Object header{
      {"__metadata__",
       llvm::json::Object{{"format", "pt"}, {"producer", "oasr-run"}}}};
  size_t offset = 0;
  for (const Entry &t : tensors) {
    llvm::json::Array shape;
    if (t.tensor)
      for (int64_t d : t.tensor->ref.desc.shape)
        shape.push_back(d);
    header[t.name] = llvm::json::Object{
        {"dtype",
         t.tensor ? safetensorsDType(t.tensor->ref.desc.dtype) : "I64"},
        {"shape", std::move(shape)},
        {"data_offsets",
         llvm::json::Array{int64_t(offset), int64_t(offset + t.bytes())}}};
    offset += t.bytes();
  }
  std::string text = formatJSON(std::move(header));
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  auto fail = [&](const std::string &why) {
    llvm::sys::fs::remove(tmp);
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s: %s",
                                   path.c_str(), why.c_str());
  };
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec, llvm::sys::fs::OF_None);
    if (ec)
      return fail("cannot write: " + ec.message());
    uint64_t n = text.size();
    char length[8];
    for (int k = 0; k < 8; ++k)
      length[k] = char((n >> (8 * k)) & 0xff);
    os.write(length, 8);
    os << text;
    std::vector<char> host;
    for (const Entry &t : tensors) {
      host.resize(t.bytes());
      if (t.tensor)
        exec.backend().copyToHost(host.data(), t.tensor->ref.data, host.size());
      else
        for (int k = 0; k < 8; ++k)
          host[size_t(k)] = char((uint64_t(t.count) >> (8 * k)) & 0xff);
      os.write(host.data(), host.size());
    }
    os.close();
    if (os.has_error())
      return fail("cannot write: " + os.error().message());
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path))
    return fail("cannot replace: " + ec.message());
  return tensors.size();
}

} // namespace oasr::rt
