//===- ORTCheckpoint.cpp - ONNX Runtime training checkpoints --------------===//
//
// Reads and writes ORT's checkpoint FlatBuffer through the code flatc
// generates from ORTCheckpoint.fbs at build time.
//
//===----------------------------------------------------------------------===//

#include "oasr/Import/ORTCheckpoint.h"
#include "oasr/Import/ONNXModel.h"

#include "ORTCheckpoint_generated.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace oasr;
using namespace oasr::ort;
using llvm::Expected;
using llvm::StringRef;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str().c_str());
}

int64_t CheckpointTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

const CheckpointTensor *ParameterOptimizerState::find(StringRef name) const {
  for (const CheckpointTensor &t : momentums)
    if (t.name == name)
      return &t;
  return nullptr;
}

const ParameterOptimizerState *OptimizerGroup::find(StringRef param) const {
  for (const ParameterOptimizerState &s : states)
    if (s.param == param)
      return &s;
  return nullptr;
}

const CheckpointTensor *CheckpointContent::find(StringRef name) const {
  for (const auto *list : {&trainable, &frozen})
    for (const CheckpointTensor &t : *list)
      if (t.name == name)
        return &t;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// `t` as a CheckpointTensor pointing into `base`; checks its byte count.
static Expected<CheckpointTensor>
readTensor(const ortfbs::Tensor *t, const uint8_t *base, StringRef where) {
  CheckpointTensor out;
  if (!t || !t->name())
    return makeError(where + ": a tensor without a name");
  out.name = t->name()->str();
  if (t->dims())
    out.dims.assign(t->dims()->begin(), t->dims()->end());
  out.dataType = t->data_type();
  if (t->raw_data()) {
    out.bytes = {t->raw_data()->data(), t->raw_data()->size()};
    out.offset = uint64_t(t->raw_data()->data() - base);
  }
  uint64_t n = 1;
  for (int64_t d : out.dims) {
    if (d < 0 || (d && n > (uint64_t(1) << 62) / uint64_t(d)))
      return makeError(
          llvm::formatv("{0}: tensor '{1}' has invalid dims", where, out.name));
    n *= uint64_t(d);
  }
  size_t element = onnximport::getElementSize(out.dataType);
  if (element && n * element != out.bytes.size())
    return makeError(llvm::formatv(
        "{0}: tensor '{1}' has {2} bytes of data; its dims and type {3} "
        "need {4}",
        where, out.name, out.bytes.size(),
        onnximport::getDataTypeName(out.dataType), n * element));
  return out;
}

static llvm::Error
readTensors(const flatbuffers::Vector<flatbuffers::Offset<ortfbs::Tensor>> *v,
            const uint8_t *base, StringRef where,
            std::vector<CheckpointTensor> &out) {
  if (!v)
    return llvm::Error::success();
  for (const ortfbs::Tensor *t : *v) {
    auto tensor = readTensor(t, base, where);
    if (!tensor)
      return tensor.takeError();
    out.push_back(std::move(*tensor));
  }
  return llvm::Error::success();
}

static llvm::Error readOptimizerGroups(const ortfbs::Checkpoint *root,
                                       const uint8_t *base, StringRef where,
                                       CheckpointContent &out) {
  if (!root->optimizer_groups())
    return llvm::Error::success();
  for (const ortfbs::OptimizerGroup *g : *root->optimizer_groups()) {
    OptimizerGroup group;
    if (g->group_name())
      group.name = g->group_name()->str();
    group.step = g->step();
    group.initialLearningRate = g->initial_learning_rate();
    if (g->optimizer_states())
      for (const ortfbs::ParameterOptimizerState *s : *g->optimizer_states()) {
        ParameterOptimizerState state;
        if (!s->param_name())
          return makeError(where + ": optimizer group '" + group.name +
                           "' has a state without a parameter name");
        state.param = s->param_name()->str();
        if (llvm::Error err =
                readTensors(s->momentums(), base, where, state.momentums))
          return err;
        group.states.push_back(std::move(state));
      }
    out.optimizerGroups.push_back(std::move(group));
  }
  return llvm::Error::success();
}

static void readProperties(const ortfbs::PropertyBag *bag, PropertyBag &out) {
  if (!bag)
    return;
  auto str = [](const flatbuffers::String *s) {
    return s ? s->str() : std::string();
  };
  if (bag->ints())
    for (const ortfbs::IntProperty *p : *bag->ints())
      out.ints.emplace_back(str(p->name()), p->value());
  if (bag->floats())
    for (const ortfbs::FloatProperty *p : *bag->floats())
      out.floats.emplace_back(str(p->name()), p->value());
  if (bag->strings())
    for (const ortfbs::StringProperty *p : *bag->strings())
      out.strings.emplace_back(str(p->name()), str(p->value()));
}

Expected<Checkpoint> ort::readCheckpoint(StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return makeError(path + ": cannot open: " + file.getError().message());
  const auto *base =
      reinterpret_cast<const uint8_t *>((*file)->getBufferStart());
  size_t size = (*file)->getBufferSize();
  if (size < 8 || !ortfbs::CheckpointBufferHasIdentifier(base))
    return makeError(path + ": not an ONNX Runtime checkpoint (no \"" +
                     ortfbs::CheckpointIdentifier() +
                     "\" FlatBuffer identifier)");
  flatbuffers::Verifier verifier(base, size);
  if (!ortfbs::VerifyCheckpointBuffer(verifier))
    return makeError(llvm::formatv(
        "{0}: truncated or corrupt ONNX Runtime checkpoint (the FlatBuffer "
        "verifier rejects its {1} bytes)",
        path, size));
  const ortfbs::Checkpoint *root = ortfbs::GetCheckpoint(base);
  Checkpoint out;
  out.path = path.str();
  out.version = root->version();
  if (out.version < 1 || out.version > kCheckpointVersion)
    return makeError(llvm::formatv(
        "{0}: checkpoint format version {1} is not supported (supported: 1 "
        "to {2}, what onnxruntime-training 1.19 writes)",
        path, out.version, kCheckpointVersion));
  if (const ortfbs::ModuleState *m = root->module_state()) {
    if (m->is_nominal_state())
      return makeError(path + ": a nominal checkpoint (parameter names "
                              "without values); oasr needs their values");
    if (m->has_external_data())
      return makeError(path + ": the parameters' data lies in an external "
                              "file beside the checkpoint, which oasr does "
                              "not read");
    if (llvm::Error err =
            readTensors(m->requires_grad_params(), base, path, out.trainable))
      return std::move(err);
    if (llvm::Error err =
            readTensors(m->frozen_params(), base, path, out.frozen))
      return std::move(err);
  }
  if (llvm::Error err = readOptimizerGroups(root, base, path, out))
    return std::move(err);
  readProperties(root->property_bag(), out.properties);
  out.buffer = std::move(*file);
  return std::move(out);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

using TensorOffsets = std::vector<flatbuffers::Offset<ortfbs::Tensor>>;

static TensorOffsets writeTensors(flatbuffers::FlatBufferBuilder &b,
                                  const std::vector<CheckpointTensor> &list) {
  TensorOffsets out;
  for (const CheckpointTensor &t : list) {
    // ORT reads raw_data as the element type: align it for the widest.
    b.ForceVectorAlignment(t.bytes.size(), sizeof(uint8_t), 16);
    auto raw = b.CreateVector(t.bytes.data(), t.bytes.size());
    auto dims = b.CreateVector(t.dims);
    auto name = b.CreateString(t.name);
    out.push_back(ortfbs::CreateTensor(b, name, 0, dims, t.dataType, raw));
  }
  return out;
}

static flatbuffers::Offset<ortfbs::PropertyBag>
writeProperties(flatbuffers::FlatBufferBuilder &b, const PropertyBag &bag) {
  std::vector<flatbuffers::Offset<ortfbs::IntProperty>> ints;
  std::vector<flatbuffers::Offset<ortfbs::FloatProperty>> floats;
  std::vector<flatbuffers::Offset<ortfbs::StringProperty>> strings;
  for (const auto &[name, value] : bag.ints)
    ints.push_back(ortfbs::CreateIntProperty(b, b.CreateString(name), value));
  for (const auto &[name, value] : bag.floats)
    floats.push_back(
        ortfbs::CreateFloatProperty(b, b.CreateString(name), value));
  for (const auto &[name, value] : bag.strings)
    strings.push_back(ortfbs::CreateStringProperty(b, b.CreateString(name),
                                                   b.CreateString(value)));
  return ortfbs::CreatePropertyBag(
      b, b.CreateVector(ints), b.CreateVector(floats), b.CreateVector(strings));
}

std::string ort::serializeCheckpoint(const CheckpointContent &content) {
  flatbuffers::FlatBufferBuilder b(1 << 16);
  TensorOffsets trainable = writeTensors(b, content.trainable);
  TensorOffsets frozen = writeTensors(b, content.frozen);
  auto module = ortfbs::CreateModuleState(b, b.CreateVector(trainable),
                                          b.CreateVector(frozen));
  std::vector<flatbuffers::Offset<ortfbs::OptimizerGroup>> groups;
  for (const OptimizerGroup &g : content.optimizerGroups) {
    std::vector<flatbuffers::Offset<ortfbs::ParameterOptimizerState>> states;
    for (const ParameterOptimizerState &s : g.states) {
      TensorOffsets momentums = writeTensors(b, s.momentums);
      states.push_back(ortfbs::CreateParameterOptimizerState(
          b, b.CreateString(s.param), b.CreateVector(momentums)));
    }
    groups.push_back(ortfbs::CreateOptimizerGroup(b, b.CreateString(g.name),
                                                  g.step, g.initialLearningRate,
                                                  b.CreateVector(states)));
  }
  auto root = ortfbs::CreateCheckpoint(b, content.version, module,
                                       b.CreateVector(groups),
                                       writeProperties(b, content.properties));
  ortfbs::FinishCheckpointBuffer(b, root);
  return std::string(reinterpret_cast<const char *>(b.GetBufferPointer()),
                     b.GetSize());
}
