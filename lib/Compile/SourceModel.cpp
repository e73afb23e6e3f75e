//===- SourceModel.cpp - The ONNX model a run trains, for weights and --save
//===//

#include "oasr/Compile/SourceModel.h"

#include "oasr/Runtime/Checkpoint.h"

#if OASR_HAVE_IMPORT
#include "oasr/Import/ONNXModel.h"
#include "oasr/Import/ORTCheckpoint.h"
#include "oasr/Import/ORTTraining.h"
#endif

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

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
  // An ORT training model takes its parameters from the checkpoint.
  auto ckpt = onnximport::attachORTCheckpoint(**mf);
  if (!ckpt)
    return ckpt.takeError();
  std::unique_ptr<SourceModel> source(new SourceModel());
  source->model = std::move(*mf);
  source->ortCheckpointPath = std::move(*ckpt);
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

//===----------------------------------------------------------------------===//
// ONNX Runtime checkpoints: Adam's state in, the trained state out
//===----------------------------------------------------------------------===//

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str().c_str());
}

/// The ORT momentum an Adam state tensor holds: slot 0 is tagged with the
/// parameter's name, the second moment with "<name>:h".
static std::pair<std::string, llvm::StringRef>
momentumOf(const PersistentTensor &t) {
  llvm::StringRef name(t.name);
  if (name.consume_back(":h"))
    return {name.str(), ort::kMomentum1};
  return {name.str(), ort::kMomentum0};
}

llvm::Expected<int64_t> SourceModel::restoreOptimizerState(Executor &exec) {
  baseUpdateCount = exec.updateCount();
  if (ortCheckpointPath.empty() || exec.optimizerName() != "adam")
    return 0;
  auto ckpt = ort::readCheckpoint(ortCheckpointPath);
  if (!ckpt)
    return ckpt.takeError();
  if (ckpt->optimizerGroups.empty())
    return 0;
  if (ckpt->optimizerGroups.size() != 1)
    return makeError(llvm::formatv("{0}: {1} optimizer groups; oasr trains "
                                   "every parameter with one optimizer",
                                   ortCheckpointPath,
                                   ckpt->optimizerGroups.size()));
  const ort::OptimizerGroup &group = ckpt->optimizerGroups.front();
  for (const PersistentTensor &t : exec.persistent()) {
    if (t.kind != PersistentTensor::OptState)
      continue;
    auto [param, which] = momentumOf(t);
    const ort::ParameterOptimizerState *state = group.find(param);
    const ort::CheckpointTensor *m = state ? state->find(which) : nullptr;
    if (!m)
      return makeError(ortCheckpointPath + ": optimizer group '" + group.name +
                       "' has no " + which + " for parameter '" + param + "'");
    if (m->dataType != int32_t(onnximport::DataType::Float) ||
        m->bytes.size() != t.ref.bytes())
      return makeError(llvm::formatv(
          "{0}: {1} of parameter '{2}' has {3} bytes of type {4}; the "
          "parameter's Adam state needs {5} bytes of f32",
          ortCheckpointPath, which, param, m->bytes.size(),
          onnximport::getDataTypeName(m->dataType), t.ref.bytes()));
    exec.backend().copyToDevice(t.ref.data, m->bytes.data(), m->bytes.size());
  }
  exec.setUpdateCount(baseUpdateCount + group.step);
  return group.step;
}

/// `exec`'s f32 tensor as checkpoint bytes (kept alive in `store`).
static llvm::ArrayRef<uint8_t>
hostBytes(Executor &exec, const TensorRef &ref,
          std::vector<std::vector<char>> &store) {
  store.emplace_back(ref.bytes());
  exec.backend().copyToHost(store.back().data(), ref.data, ref.bytes());
  return {reinterpret_cast<const uint8_t *>(store.back().data()),
          store.back().size()};
}

llvm::Expected<size_t> SourceModel::saveORT(Executor &exec,
                                            llvm::StringRef path,
                                            double learningRate) const {
  if (ortCheckpointPath.empty())
    return makeError(model->path() +
                     ": not an ONNX Runtime training model that takes its "
                     "parameters from a checkpoint beside it");
  auto ckpt = ort::readCheckpoint(ortCheckpointPath);
  if (!ckpt)
    return ckpt.takeError();
  std::map<std::string, const PersistentTensor *> params, adam;
  for (const PersistentTensor &t : exec.persistent())
    (t.kind == PersistentTensor::OptState ? adam : params)[t.name] = &t;
  std::vector<std::vector<char>> store;
  ort::CheckpointContent out;
  out.properties = ckpt->properties;
  size_t written = 0;
  for (auto [from, to] : {std::make_pair(&ckpt->trainable, &out.trainable),
                          std::make_pair(&ckpt->frozen, &out.frozen)})
    for (ort::CheckpointTensor t : *from) {
      auto it = params.find(t.name);
      if (it != params.end() && it->second->ref.bytes() == t.bytes.size() &&
          it->second->ref.desc.dtype == DType::F32) {
        t.bytes = hostBytes(exec, it->second->ref, store);
        ++written;
      }
      to->push_back(std::move(t));
    }
  if (exec.optimizerName() == "adam") {
    ort::OptimizerGroup group;
    group.name = "group0"; // ORT's one group
    if (!ckpt->optimizerGroups.empty()) {
      group.name = ckpt->optimizerGroups.front().name;
      group.initialLearningRate =
          ckpt->optimizerGroups.front().initialLearningRate;
    }
    if (learningRate >= 0)
      group.initialLearningRate = float(learningRate);
    group.step = std::max<int64_t>(exec.updateCount() - baseUpdateCount, 0);
    for (const ort::CheckpointTensor &p : out.trainable) {
      ort::ParameterOptimizerState state;
      state.param = p.name;
      for (auto [suffix, name] : {std::make_pair("", ort::kMomentum0),
                                  std::make_pair(":h", ort::kMomentum1)}) {
        auto it = adam.find(p.name + suffix);
        if (it == adam.end())
          return makeError(path + ": no Adam state for parameter '" + p.name +
                           "' of " + ortCheckpointPath);
        ort::CheckpointTensor m = p;
        m.name = name.str();
        m.bytes = hostBytes(exec, it->second->ref, store);
        state.momentums.push_back(std::move(m));
      }
      group.states.push_back(std::move(state));
    }
    out.optimizerGroups.push_back(std::move(group));
  }
  std::string bytes = ort::serializeCheckpoint(out);
  if (auto err =
          writeFileAtomically(path, [&](llvm::StringRef tmp) -> llvm::Error {
            std::error_code ec;
            llvm::raw_fd_ostream os(tmp, ec);
            if (ec)
              return makeError(tmp + ": cannot write: " + ec.message());
            os << bytes;
            os.close();
            if (os.has_error())
              return makeError(tmp + ": write failed: " + os.error().message());
            return llvm::Error::success();
          }))
    return std::move(err);
  return written;
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
llvm::Expected<int64_t> SourceModel::restoreOptimizerState(Executor &) {
  return 0;
}
llvm::Expected<size_t> SourceModel::saveORT(Executor &, llvm::StringRef,
                                            double) const {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "this build has no ONNX importer");
}
#endif
