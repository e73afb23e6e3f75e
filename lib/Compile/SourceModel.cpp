//===- SourceModel.cpp - The ONNX model a run trains, for weights and --save
//===//

#include "oasr/Compile/SourceModel.h"

#include "oasr/Runtime/Checkpoint.h"

#if OASR_HAVE_IMPORT
#include "oasr/Import/ONNXModel.h"
#endif

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>
#include <map>

using namespace oasr;
using namespace oasr::rt;

#if OASR_HAVE_IMPORT
SourceModel::~SourceModel() = default;

llvm::Expected<std::unique_ptr<SourceModel>>
SourceModel::open(const Executor &exec) {
  if (exec.sourcePath().empty() || !llvm::sys::fs::exists(exec.sourcePath()))
    return nullptr;
  auto mf = onnximport::ModelFile::load(exec.sourcePath());
  if (!mf)
    return mf.takeError();
  std::unique_ptr<SourceModel> source(new SourceModel());
  source->model = std::move(*mf);
  return std::move(source);
}

InitializerLoader SourceModel::loader() const {
  const onnximport::ModelFile *m = model.get();
  return [m](const std::string &name, const TensorRef &dst,
             std::string &error) -> bool {
    if (!m->findInitializer(name))
      return false;
    auto data = m->readInitializer(name);
    if (!data) {
      // The caller names the model and the initializer already.
      error = llvm::toString(data.takeError());
      std::string named = (m->path() + ": initializer '" + name + "'").str();
      llvm::StringRef rest(error);
      if (rest.consume_front(named)) {
        rest.consume_front(": ");
        rest.consume_front(" ");
        error = rest.str();
      }
      return false;
    }
    size_t want = dst.bytes();
    if (data->bytes.size() != want ||
        data->dataType != int32_t(onnximport::DataType::Float)) {
      error = llvm::formatv("has {0} bytes of type {1}, the module "
                            "expects {2} bytes of f32",
                            data->bytes.size(),
                            onnximport::getDataTypeName(data->dataType), want)
                  .str();
      return false;
    }
    std::memcpy(dst.data, data->bytes.data(), want);
    return true;
  };
}

llvm::Expected<size_t> SourceModel::save(Executor &exec,
                                         llvm::StringRef path) const {
  std::map<std::string, std::vector<float>> values;
  for (const PersistentTensor &t : exec.persistent())
    if (t.kind != PersistentTensor::OptState &&
        t.ref.desc.dtype == DType::F32 && model->findInitializer(t.name)) {
      std::vector<float> v(size_t(t.ref.numel()));
      exec.backend().copyToHost(v.data(), t.ref.data, v.size() * sizeof(float));
      values[t.name] = std::move(v);
    }
  // A temporary file next to the target, renamed over it: a save that is
  // killed midway leaves the previous file intact.
  if (auto err =
          writeFileAtomically(path, [&](llvm::StringRef tmp) -> llvm::Error {
            // The update count T advances with the updates made.
            std::map<std::string, int64_t> counts;
            if (!exec.updateCountName().empty() &&
                model->findInitializer(exec.updateCountName()))
              counts[exec.updateCountName()] = exec.updateCount();
            return model->saveWithInitializers(tmp, values, counts);
          }))
    return std::move(err);
  return values.size();
}
#else
SourceModel::~SourceModel() = default;
llvm::Expected<std::unique_ptr<SourceModel>>
SourceModel::open(const Executor &) {
  return nullptr;
}
InitializerLoader SourceModel::loader() const { return {}; }
llvm::Expected<size_t> SourceModel::save(Executor &, llvm::StringRef) const {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "this build has no ONNX importer");
}
#endif
