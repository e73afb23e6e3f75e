//===- Dnnl.h - oneDNN plumbing shared by the CPU kernels -----*- C++ -*-===//
//
// Private to runtime/cpu: binding the executor's buffers to oneDNN
// primitives (BoundArg, BlockedKernel for primitives that pick their own
// layouts, PlainPrimitive/PrimitiveKernel for plain ones) and the type
// checks every oneDNN-backed kernel shares. The kernels themselves live in
// their op family's file (convolutions, products, batch normalization,
// average pooling, activations, softmax, bf16 arithmetic, Transpose).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CPU_DNNL_H
#define OASR_RUNTIME_CPU_DNNL_H

#include "CpuKernels.h"

#include <functional>
#include <initializer_list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace oasr::rt::cpu {

using dnnl::memory;
using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;
using Args = std::unordered_map<int, dnnl::memory>;

/// A buffer of the executor bound at run time, and the layout a primitive
/// wants for it; when they differ the kernel keeps a copy in the primitive's
/// layout (run-time scratch, placed by declareScratch in the kernel's
/// workspace) plus the reorder between the two.
struct BoundArg {
  memory user, prim;
  dnnl::reorder toPrim, fromPrim;
  bool needsReorder = false;

  void init(const memory::desc &userMd, const memory::desc &primMd,
            bool isOutput) {
    user = memory(userMd, engine(), DNNL_MEMORY_NONE);
    if (userMd == primMd) {
      prim = user;
      needsReorder = false;
      return;
    }
    prim = memory(primMd, engine(), DNNL_MEMORY_NONE);
    needsReorder = true;
    if (isOutput)
      fromPrim = dnnl::reorder(prim, user);
    else
      toPrim = dnnl::reorder(user, prim);
  }
  void bind(const void *p) { user.set_data_handle(const_cast<void *>(p)); }
  void in(dnnl::stream &s) {
    if (needsReorder)
      toPrim.execute(s, user, prim);
  }
  void out(dnnl::stream &s) {
    if (needsReorder)
      fromPrim.execute(s, prim, user);
  }
};

/// A kernel whose primitives work on blocked copies (BoundArg).
class BlockedKernel : public CpuKernel {
public:
  using CpuKernel::CpuKernel;

protected:
  /// The blocked copies of `args` that exist become workspace scratch.
  void declareScratch(std::initializer_list<BoundArg *> args) {
    for (BoundArg *a : args)
      if (a->needsReorder)
        addScratch(a->prim);
  }
};

/// A buffer bound at run time with no layout change.
inline memory userMem(const memory::desc &md) {
  return memory(md, engine(), DNNL_MEMORY_NONE);
}
inline void bindMem(memory &m, const void *p) {
  m.set_data_handle(const_cast<void *>(p));
}

/// A primitive whose arguments are all executor buffers used in place (no
/// layout change): in()/out() declare each argument once, run() binds the
/// node's buffers to them and executes.
class PlainPrimitive {
public:
  explicit PlainPrimitive(dnnl::primitive prim) : prim(std::move(prim)) {}

  /// Argument `key` (layout `md`) is operand `index` of the node.
  PlainPrimitive &in(int key, const memory::desc &md, size_t index) {
    return add(key, md, false, index);
  }
  /// Argument `key` (layout `md`) is result `index` of the node.
  PlainPrimitive &out(int key, const memory::desc &md, size_t index) {
    return add(key, md, true, index);
  }
  void run(const std::vector<TensorRef> &in,
           const std::vector<TensorRef> &out) {
    for (Slot &a : slots)
      bindMem(a.mem, a.isOutput ? out[a.index].data : in[a.index].data);
    prim.execute(stream(), args);
    stream().wait();
  }

private:
  struct Slot {
    memory mem;
    bool isOutput;
    size_t index;
  };
  PlainPrimitive &add(int key, const memory::desc &md, bool isOutput,
                      size_t index) {
    slots.push_back({userMem(md), isOutput, index});
    args[key] = slots.back().mem;
    return *this;
  }

  dnnl::primitive prim;
  std::vector<Slot> slots;
  Args args;
};

/// A node that is one PlainPrimitive.
class PrimitiveKernel final : public CpuKernel {
public:
  PrimitiveKernel(const OpSpec &spec, PlainPrimitive p)
      : CpuKernel(spec), p(std::move(p)) {}
  void compute(const std::vector<TensorRef> &in,
               const std::vector<TensorRef> &out) override {
    p.run(in, out);
  }

private:
  PlainPrimitive p;
};

/// oneDNN's name for a float tensor's element type (f32 or bf16).
inline dt dataType(const TensorDesc &d) {
  return d.dtype == DType::BF16 ? dt::bf16 : dt::f32;
}

inline memory::desc anyDesc(const dims &d, dt type = dt::f32) {
  return memory::desc(d, type, memory::format_tag::any);
}

/// The oneDNN type of a node whose float tensors `ins` and `outs` are all
/// f32 or all bf16 (oneDNN's bf16 primitives accumulate in f32); a mix, or
/// another type, is an error naming the tensor (the backend then runs the
/// f32 kernel on widened copies). With `wideOutputs` a product of bf16
/// operands may also write f32 results (oasr-fuse-casts' products).
inline Status uniformFloat(const OpSpec &spec, const std::vector<size_t> &ins,
                           const std::vector<size_t> &outs, dt &type,
                           bool wideOutputs = false) {
  DType want = DType::F32;
  for (size_t i : ins)
    if (i < spec.inputs.size() && spec.inputs[i].dtype == DType::BF16)
      want = DType::BF16;
  type = want == DType::BF16 ? dt::bf16 : dt::f32;
  for (size_t i : ins)
    if (i < spec.inputs.size())
      OASR_RETURN_IF_ERROR(checkDType(spec, true, i, want));
  for (size_t i : outs) {
    if (i >= spec.outputs.size())
      continue;
    if (wideOutputs && want == DType::BF16 &&
        spec.outputs[i].dtype == DType::F32)
      continue;
    OASR_RETURN_IF_ERROR(checkDType(spec, false, i, want));
  }
  return Status::success();
}

/// A forward activation X -> Y with both in layout `md`.
inline std::unique_ptr<Kernel> forwardKernel(const OpSpec &spec,
                                             dnnl::primitive prim,
                                             const memory::desc &md) {
  PlainPrimitive p(std::move(prim));
  p.in(DNNL_ARG_SRC, md, 0).out(DNNL_ARG_DST, md, 0);
  return std::make_unique<PrimitiveKernel>(spec, std::move(p));
}

/// A backward activation dY, Y -> dX (from the forward result), all in layout
/// `md`.
inline std::unique_ptr<Kernel> backwardKernel(const OpSpec &spec,
                                              dnnl::primitive prim,
                                              const memory::desc &md) {
  PlainPrimitive p(std::move(prim));
  p.in(DNNL_ARG_DIFF_DST, md, 0)
      .in(DNNL_ARG_DST, md, 1)
      .out(DNNL_ARG_DIFF_SRC, md, 0);
  return std::make_unique<PrimitiveKernel>(spec, std::move(p));
}

} // namespace oasr::rt::cpu

#endif // OASR_RUNTIME_CPU_DNNL_H
