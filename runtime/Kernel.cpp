//===- Kernel.cpp - The runtime's kernel-backend interface ----------------===//
//
// Out-of-line pieces of Kernel.h: attribute accessors, element-type helpers
// and the anchors of the interface classes' vtables.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/Kernel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace oasr::rt {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::I32:
    return 4;
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::Bool:
    return "i1";
  }
  return "?";
}

int64_t AttrMap::getInt(const std::string &name, int64_t dflt) const {
  auto it = values.find(name);
  if (it == values.end())
    return dflt;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return *i;
  if (auto *d = std::get_if<double>(&it->second))
    return int64_t(*d);
  if (auto *v = std::get_if<std::vector<int64_t>>(&it->second))
    if (v->size() == 1)
      return v->front();
  return dflt;
}

double AttrMap::getFloat(const std::string &name, double dflt) const {
  auto it = values.find(name);
  if (it == values.end())
    return dflt;
  if (auto *d = std::get_if<double>(&it->second))
    return *d;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return double(*i);
  if (auto *v = std::get_if<std::vector<double>>(&it->second))
    if (v->size() == 1)
      return v->front();
  return dflt;
}

std::string AttrMap::getString(const std::string &name,
                               const std::string &dflt) const {
  auto it = values.find(name);
  if (it == values.end())
    return dflt;
  if (auto *s = std::get_if<std::string>(&it->second))
    return *s;
  return dflt;
}

std::vector<int64_t> AttrMap::getInts(const std::string &name,
                                      std::vector<int64_t> dflt) const {
  auto it = values.find(name);
  if (it == values.end())
    return dflt;
  if (auto *v = std::get_if<std::vector<int64_t>>(&it->second))
    return *v;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return {*i};
  return dflt;
}

std::vector<std::string>
AttrMap::getStrings(const std::string &name,
                    std::vector<std::string> dflt) const {
  auto it = values.find(name);
  if (it == values.end())
    return dflt;
  if (auto *v = std::get_if<std::vector<std::string>>(&it->second))
    return *v;
  if (auto *s = std::get_if<std::string>(&it->second))
    return {*s};
  return dflt;
}

std::optional<InferenceForm> inferenceForm(const OpSpec &spec) {
  auto keep = [&](size_t ins, size_t outs) {
    InferenceForm f{spec, std::min(ins, spec.inputs.size()),
                    std::min(outs, spec.outputs.size())};
    f.spec.inputs.resize(f.inputs);
    f.spec.inputValues.resize(std::min(f.inputs, spec.inputValues.size()));
    f.spec.outputs.resize(f.outputs);
    f.spec.outputUsed.resize(std::min(f.outputs, spec.outputUsed.size()));
    f.spec.attrs.set("training_mode", int64_t(0));
    return f;
  };
  if (spec.opType == "BatchNormalization" && spec.outputs.size() > 1)
    return keep(spec.inputs.size(), 1);
  if (spec.opType == "Dropout" && spec.inputs.size() + spec.outputs.size() > 2)
    return keep(1, 1);
  return std::nullopt;
}

Kernel::~Kernel() = default;
KernelBackend::~KernelBackend() = default;

KernelOr KernelBackend::createKernel(const OpSpec &spec) {
  std::string error;
  if (std::unique_ptr<Kernel> k = create(spec, error))
    return k;
  return Status::error(error.empty() ? std::string("the ") + name() +
                                           " backend has no kernel for it"
                                     : error);
}

std::unique_ptr<Kernel> KernelBackend::create(const OpSpec &spec,
                                              std::string &error) {
  KernelOr k = createKernel(spec);
  if (k.ok())
    return std::move(*k);
  error = k.status().message();
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Fatal kernel errors
//===----------------------------------------------------------------------===//

/// The kernel running on this thread (KernelScope), for fatalKernelError.
static thread_local const std::string *gNode = nullptr, *gOp = nullptr;

KernelScope::KernelScope(const std::string &node, const std::string &op)
    : prevNode(gNode), prevOp(gOp) {
  gNode = &node;
  gOp = &op;
}

KernelScope::~KernelScope() {
  gNode = prevNode;
  gOp = prevOp;
}

void fatalKernelError(const std::string &node, const std::string &op,
                      const std::string &message) {
  std::fprintf(stderr, "oasr: fatal: node '%s' (%s): %s\n", node.c_str(),
               op.c_str(), message.c_str());
  std::abort();
}

void fatalDataError(const std::string &node, const std::string &op,
                    const std::string &message) {
  std::fprintf(stderr, "oasr: error: node '%s' (%s): %s\n", node.c_str(),
               op.c_str(), message.c_str());
  std::fflush(nullptr);
  // Other threads may be inside kernels: no destructors run.
  std::_Exit(1);
}

void fatalDataError(const std::string &message) {
  std::fprintf(stderr, "oasr: error: %s\n", message.c_str());
  std::fflush(nullptr);
  std::_Exit(1);
}

void fatalKernelError(const std::string &message) {
  if (gNode)
    fatalKernelError(*gNode, *gOp, message);
  std::fprintf(stderr, "oasr: fatal: %s\n", message.c_str());
  std::abort();
}

bool KernelBackend::beginCapture(std::string &why) {
  why = std::string("the ") + name() +
        " backend runs each kernel as it is called (no graph capture)";
  return false;
}

int KernelBackend::endCapture(std::string &why) {
  why = std::string("the ") + name() + " backend has no graph capture";
  return -1;
}

void KernelBackend::replay(int) {}

} // namespace oasr::rt
