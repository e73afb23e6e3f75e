//===- ExecutorInspect.cpp - Loss, accuracy and NaN search ----------------===//
//
// What the training loop reads back from a step: the loss, the correct
// predictions, a gradient by name, and the first non-finite value.
//
//===----------------------------------------------------------------------===//

#include "ExecutorImpl.h"

using llvm::Expected;

namespace oasr::rt {

/// Index of the first NaN or Inf among the f32 elements of `t` (host or
/// device memory), or -1.
static int64_t firstNonFiniteElement(KernelBackend &backend, bool hostMemory,
                                     const TensorRef &t) {
  if (!t.data || t.desc.dtype != DType::F32)
    return -1;
  std::vector<float> staging;
  const float *v = t.as<float>();
  if (!hostMemory) {
    staging.resize(size_t(t.numel()));
    backend.copyToHost(staging.data(), t.data, staging.size() * sizeof(float));
    v = staging.data();
  }
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    if (!std::isfinite(v[i]))
      return i;
  return -1;
}

std::string Executor::firstNonFinite() {
  Impl &I = *impl;
  auto describe = [&](const TensorRef &t, int64_t i) {
    std::vector<float> one(1);
    if (I.hostMemory)
      one[0] = t.as<float>()[i];
    else
      I.backend->copyToHost(one.data(), t.as<float>() + i, sizeof(float));
    return llvm::formatv(" (element {0} of {1} is {2})", i, t.numel(),
                         double(one[0]))
        .str();
  };
  for (const PersistentTensor &t : persistentTensors) {
    if (t.kind == PersistentTensor::OptState)
      continue;
    if (int64_t i = firstNonFiniteElement(*I.backend, I.hostMemory, t.ref);
        i >= 0)
      return std::string(t.kind == PersistentTensor::Param ? "parameter '"
                                                           : "state '") +
             t.name + "'" + describe(t.ref, i);
  }
  if (int64_t i = firstNonFiniteElement(*I.backend, I.hostMemory, inputRef);
      i >= 0)
    return "the input batch" + describe(inputRef, i);
  I.uploadBatch();
  for (unsigned k = 0; k < I.forwardEnd && k < I.instrs.size(); ++k) {
    Instr &instr = I.instrs[k];
    if (instr.op != InstrOp::Kernel)
      continue;
    instr.kernel->run(instr.inRefs, instr.outRefs);
    I.backend->synchronize();
    for (size_t o = 0; o < instr.outRefs.size(); ++o)
      if (int64_t i =
              firstNonFiniteElement(*I.backend, I.hostMemory, instr.outRefs[o]);
          i >= 0) {
        const PlanStepInfo &info = stepInfos[k];
        return llvm::formatv("result {0} of node '{1}' ({2})", o, info.name,
                             info.opType)
                   .str() +
               describe(instr.outRefs[o], i);
      }
  }
  return "";
}

float Executor::loss() const {
  const Impl &I = *impl;
  const ValueInfo &v = I.values[size_t(I.lossValue)];
  float l = 0;
  if (I.hostMemory)
    std::memcpy(&l, v.ptr, sizeof(float));
  else
    I.backend->copyToHost(&l, v.ptr, sizeof(float));
  return l;
}

int64_t Executor::correct() const {
  const Impl &I = *impl;
  if (I.scoresValue < 0 || I.labelValue < 0)
    return 0;
  const ValueInfo &s = I.values[size_t(I.scoresValue)];
  const ValueInfo &l = I.values[size_t(I.labelValue)];
  if (s.desc.rank() != 2 || s.desc.dtype != DType::F32)
    return 0;
  int64_t n = s.desc.shape[0], c = s.desc.shape[1];
  std::vector<float> scores(size_t(n * c));
  std::vector<char> labels(l.desc.bytes());
  I.backend->copyToHost(scores.data(), s.ptr, scores.size() * sizeof(float));
  I.backend->copyToHost(labels.data(), l.ptr, labels.size());
  int64_t ok = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float *row = scores.data() + i * c;
    int64_t best = std::max_element(row, row + c) - row;
    int64_t label = l.desc.dtype == DType::I64
                        ? reinterpret_cast<int64_t *>(labels.data())[i]
                        : reinterpret_cast<int32_t *>(labels.data())[i];
    ok += best == label;
  }
  return ok;
}

TensorRef Executor::gradient(const std::string &name) const {
  auto it = impl->gradOfParam.find(name);
  if (it == impl->gradOfParam.end())
    return TensorRef{};
  return impl->ref(it->second);
}

} // namespace oasr::rt
