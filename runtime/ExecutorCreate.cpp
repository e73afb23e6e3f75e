//===- ExecutorCreate.cpp - Executor::create: a program on a backend ------===//
//
// Turns a compiled Program (oasr/Runtime/Program.h) into the plan the
// executor runs: which instructions the backend changes (a weight copy its
// update keeps), each value's last reader, one kernel per node, the arena,
// persistent and group buffers, and the public views. No MLIR: a program
// lowered in process and one read from an .oasrprog file load alike.
//
//===----------------------------------------------------------------------===//

#include "ExecutorImpl.h"

#include "oasr/Runtime/Program.h"

using llvm::Expected;

namespace oasr::rt {

namespace {

/// Bytes of RAM plus swap of this machine (0 when unknown).
uint64_t hostMemoryBytes() {
  struct sysinfo info;
  if (::sysinfo(&info) != 0)
    return 0;
  return (uint64_t(info.totalram) + uint64_t(info.totalswap)) *
         uint64_t(info.mem_unit);
}

} // namespace

/// Executor::create(Program) in phases; each reads what the earlier ones
/// built.
class ExecutorLoader {
public:
  ExecutorLoader(Program program, KernelBackend &backend,
                 const ExecutorOptions &options)
      : P(std::move(program)), backend(backend), options(options),
        exec(new Executor()), I(*exec->impl) {
    I.backend = &backend;
    I.hostMemory = backend.hostAddressable();
    I.ranks = std::max(options.ranks, 1);
    I.deviceGraphs = options.deviceGraphs;
  }

  Expected<std::unique_ptr<Executor>> build() {
    using Phase = llvm::Error (ExecutorLoader::*)();
    for (Phase phase :
         {&ExecutorLoader::load, &ExecutorLoader::keepWeightCopies,
          &ExecutorLoader::computeLiveness, &ExecutorLoader::checkMemory,
          &ExecutorLoader::createKernels, &ExecutorLoader::planMemory,
          &ExecutorLoader::allocate, &ExecutorLoader::publish})
      if (llvm::Error err = (this->*phase)())
        return std::move(err);
    return std::move(exec);
  }

private:
  using Impl = Executor::Impl;

  static llvm::Error bad(const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid program: " + why);
  }

  /// Every index of the program in range, so that a damaged .oasrprog file
  /// is refused before anything reads through one.
  llvm::Error validate() const {
    const int nv = int(P.values.size()), ni = int(P.instrs.size());
    auto value = [&](int v) { return v >= 0 && v < nv; };
    // The lowering's own bounds (descOf): dimensions below 2^31, byte
    // counts within 63 bits.
    auto sane = [](const TensorDesc &d) {
      constexpr int64_t kMaxDim = int64_t(1) << 31, kMaxElems = INT64_MAX / 8;
      int64_t n = 1;
      for (int64_t x : d.shape) {
        if (x < 0 || x >= kMaxDim || (x && n > kMaxElems / x))
          return false;
        n *= x;
      }
      return d.shape.size() <= 64;
    };
    for (const PersistBuf &p : P.persist)
      if (!sane(p.desc) || (!p.init.empty() && p.init.size() != p.desc.bytes()))
        return bad("a persistent buffer's type or bytes do not hold together");
    for (int v = 0; v < nv; ++v) {
      const ValueInfo &vi = P.values[size_t(v)];
      bool fits = sane(vi.desc);
      if (fits && vi.where == Where::Alias && vi.aliasOf >= 0 && vi.aliasOf < v)
        fits = P.values[size_t(vi.aliasOf)].desc.bytes() == vi.desc.bytes();
      if (fits && vi.where == Where::Persistent && vi.persistent >= 0 &&
          size_t(vi.persistent) < P.persist.size())
        fits = P.persist[size_t(vi.persistent)].desc.bytes() == vi.desc.bytes();
      if (fits && vi.where == Where::Group && vi.group >= 0 &&
          size_t(vi.group) < P.groups.size())
        fits = vi.offset <= P.groups[size_t(vi.group)].bytes &&
               vi.desc.bytes() <= P.groups[size_t(vi.group)].bytes - vi.offset;
      if (!fits)
        return bad(
            llvm::formatv("value {0}'s type does not fit its storage", v));
      if ((vi.where == Where::Alias && !(vi.aliasOf >= 0 && vi.aliasOf < v)) ||
          (vi.where == Where::Persistent &&
           !(vi.persistent >= 0 && size_t(vi.persistent) < P.persist.size())) ||
          (vi.where == Where::Group &&
           !(vi.group >= 0 && size_t(vi.group) < P.groups.size())) ||
          vi.def < -1 || vi.def >= ni)
        return bad(llvm::formatv("value {0} refers to storage or an "
                                 "instruction that does not exist",
                                 v));
    }
    if (P.steps.size() != P.instrs.size())
      return bad(llvm::formatv("{0} step names for {1} instructions",
                               P.steps.size(), P.instrs.size()));
    for (int k = 0; k < ni; ++k) {
      const ProgramInstr &in = P.instrs[size_t(k)];
      bool ok = llvm::all_of(in.ins, value) && llvm::all_of(in.outs, value);
      for (auto [dst, src] : in.copies)
        ok = ok && value(dst) && value(src);
      if (in.op == InstrOp::Start || in.op == InstrOp::Wait)
        ok = ok && in.group < P.groups.size() &&
             (in.op == InstrOp::Start ? in.ins : in.outs).size() ==
                 P.groups[in.group].grads.size();
      for (int64_t pos : in.absent)
        ok = ok && pos >= 0 && size_t(pos) <= in.ins.size() + in.absent.size();
      for (auto [dst, src] : in.copies)
        ok = ok && P.values[size_t(dst)].desc.bytes() ==
                       P.values[size_t(src)].desc.bytes();
      if (in.op == InstrOp::Update) {
        // param, grad[, state...] -> param'[, state'...], all alike.
        size_t states =
            in.rule.algo == "adam" || in.rule.algo == "adamw"         ? 2
            : in.rule.algo == "momentum" || in.rule.algo == "adagrad" ? 1
                                                                      : 0;
        ok = ok && in.ins.size() >= 2 + states && in.outs.size() >= 1 + states;
        for (const std::vector<int> *list : {&in.ins, &in.outs})
          for (int v : *list)
            ok = ok && P.values[size_t(v)].desc.dtype == DType::F32 &&
                 P.values[size_t(v)].desc.numel() ==
                     P.values[size_t(in.ins[0])].desc.numel();
      }
      if (!ok)
        return bad(llvm::formatv("instruction {0} ('{1}') reads or writes "
                                 "a value or group that does not exist",
                                 k, P.steps[size_t(k)].name));
    }
    for (size_t k = 0; k < P.groups.size(); ++k)
      if (P.groups[k].index != k)
        return bad(
            llvm::formatv("group {0} is numbered {1}", k, P.groups[k].index));
    for (const ProgramGroup &g : P.groups)
      if (g.grads.size() != g.offsets.size() ||
          g.grads.size() != g.slots.size() ||
          g.grads.size() != g.gradLayers.size() ||
          !llvm::all_of(g.grads, value) ||
          !llvm::all_of(g.slots, [&](const GradSlot &sl) {
            return value(sl.slot) && (sl.wait == -1 || value(sl.wait)) &&
                   sl.readyInstr >= -1 && sl.readyInstr < ni;
          }))
        return bad(llvm::formatv("group {0} is inconsistent", g.index));
    for (const ProgramTensor &t : P.tensors)
      if (!value(t.value) ||
          P.values[size_t(t.value)].where != Where::Persistent)
        return bad("tensor '" + t.name + "' has no persistent value");
    for (const auto &[name, v] : P.gradOfParam)
      if (!value(v))
        return bad("the gradient of '" + name + "' does not exist");
    for (const ProgramGradient &g : P.gradients)
      if (g.at.first >= P.groups.size() ||
          g.at.second >= P.groups[g.at.first].grads.size())
        return bad("the gradient of '" + g.param + "' is in no group");
    if (!value(P.inputValue))
      return bad("it has no input");
    for (int v : {P.labelValue, P.lossValue, P.scoresValue, P.lossScaleValue})
      if (v != -1 && !value(v))
        return bad("its label, loss or scores value does not exist");
    if (P.lossValue < 0)
      return bad("it computes no loss");
    return llvm::Error::success();
  }

  /// The program's attributes and slots into the executor; the backend's
  /// precision.
  llvm::Error load() {
    if (llvm::Error err = validate())
      return err;
    exec->source = P.source;
    exec->model = P.model;
    exec->precisionName = P.precision;
    Status precision =
        backend.setPrecision(exec->precisionName, exec->precisionWarn);
    if (!precision.ok())
      return toError(precision, "--precision=" + exec->precisionName + ": ");
    exec->countName = P.countName;
    exec->strategy = P.strategy;
    exec->costs = P.costs;
    exec->predictedUs = P.predictedUs;
    exec->alphaS = P.alphaS;
    exec->betaS = P.betaS;
    exec->groupOverheadUs = P.groupOverheadUs;
    exec->overlapRate = P.overlapRate;
    exec->compressUsPerMac = P.compressUsPerMac;
    exec->compressUsPerElement = P.compressUsPerElement;
    exec->compressPolicy = P.compress;
    exec->tier = P.tier;
    exec->wire = P.wire;
    exec->steadyExec = P.steady;
    exec->stepInfos = P.steps;
    I.updatesDone = P.updatesDone;
    I.values = P.values;
    I.persist = P.persist;
    for (ProgramInstr &in : P.instrs) {
      Instr instr;
      static_cast<ProgramInstr &>(instr) = std::move(in);
      if (instr.op == InstrOp::Update && options.lrOverride >= 0)
        instr.rule.lr = options.lrOverride;
      I.instrs.push_back(std::move(instr));
    }
    P.instrs.clear();
    I.inputValue = P.inputValue;
    I.labelValue = P.labelValue;
    I.lossValue = P.lossValue;
    I.scoresValue = P.scoresValue;
    I.lossScaleValue = P.lossScaleValue;
    I.inputVocab = P.inputVocab;
    I.forwardEnd = P.forwardEnd;
    I.gradOfParam = P.gradOfParam;
    return llvm::Error::success();
  }

  /// A backend whose update writes the weights' 16-bit copies keeps them:
  /// the program's parameter Casts leave the step for Impl::copyCasts,
  /// their results become persistent and the updates write them.
  llvm::Error keepWeightCopies() {
    if (!options.weightCopies || !backend.updatesWeightCopies())
      return llvm::Error::success();
    const size_t n = I.instrs.size();
    std::vector<int> updateOf(I.values.size(), -1);
    for (size_t k = 0; k < n; ++k)
      if (I.instrs[k].op == InstrOp::Update)
        updateOf[size_t(I.instrs[k].ins[0])] = int(k);
    auto isKeptCopy = [&](const Instr &in) {
      return in.paramCopy && in.ins.size() == 1 && in.outs.size() == 1 &&
             updateOf[size_t(in.ins[0])] >= 0;
    };
    if (llvm::none_of(I.instrs, isKeptCopy))
      return llvm::Error::success();
    std::vector<int> newIndex(n, -1);
    std::vector<Instr> kept;
    std::vector<PlanStepInfo> keptSteps;
    for (size_t k = 0; k < n; ++k) {
      Instr &in = I.instrs[k];
      int u = isKeptCopy(in) ? updateOf[size_t(in.ins[0])] : -1;
      if (u < 0) {
        newIndex[k] = int(kept.size());
        kept.push_back(std::move(in));
        keptSteps.push_back(std::move(exec->stepInfos[k]));
        continue;
      }
      ValueInfo &copy = I.values[size_t(in.outs[0])];
      copy.where = Where::Persistent;
      copy.persistent = int(I.persist.size());
      copy.def = -1;
      copy.kernelOutput = false;
      copy.used = true;
      I.persist.push_back(PersistBuf{copy.desc, nullptr, {}});
      I.instrs[size_t(u)].weightCopy = in.outs[0];
      I.copyCasts.push_back(std::move(in));
    }
    // Instruction numbers after the casts moved down.
    auto renumber = [&](int &k) {
      if (k >= 0 && size_t(k) < n)
        k = newIndex[size_t(k)];
    };
    for (ValueInfo &vi : I.values)
      renumber(vi.def);
    for (ProgramGroup &g : P.groups)
      for (GradSlot &s : g.slots)
        renumber(s.readyInstr);
    unsigned forward = 0;
    for (size_t k = 0; k < n && k < I.forwardEnd; ++k)
      forward += newIndex[k] >= 0;
    I.forwardEnd = I.forwardEnd ? forward : 0;
    I.instrs = std::move(kept);
    exec->stepInfos = std::move(keptSteps);
    return llvm::Error::success();
  }

  /// The last instruction reading each value.
  llvm::Error computeLiveness() {
    // Liveness: last instruction reading each root value.
    end = int(I.instrs.size());
    for (auto [k, instr] : llvm::enumerate(I.instrs))
      for (int v : instr.ins) {
        int r = I.root(v);
        I.values[v].used = true;
        I.values[r].used = true;
        I.values[r].lastUse = std::max(I.values[r].lastUse, int(k));
      }
    for (auto [k, instr] : llvm::enumerate(I.instrs))
      for (auto [dst, src] : instr.copies)
        I.values[I.root(dst)].lastUse =
            std::max(I.values[I.root(dst)].lastUse, int(k));
    for (int keep : {I.lossValue, I.scoresValue})
      if (keep >= 0)
        I.values[I.root(keep)].lastUse = end;
    // Values returned by the function stay valid until the end of the step.
    for (ValueInfo &vi : I.values)
      if (vi.used && vi.lastUse < 0)
        vi.lastUse = end;
    // Aliases extend their root's life to their own readers.
    for (size_t v = 0; v < I.values.size(); ++v)
      if (I.values[v].where == Where::Alias) {
        int r = I.root(int(v));
        I.values[r].lastUse =
            std::max(I.values[r].lastUse, I.values[v].lastUse);
      }
    return llvm::Error::success();
  }

  /// Refuse sizes no machine holds before any kernel sees them.
  llvm::Error checkMemory() {
    // Before any kernel is created (kernel libraries fail on sizes no
    // machine holds: oneDNN's primitive creation died with SIGFPE on a batch
    // of 2^32): host memory must at least hold the parameters, state and
    // gradient buffers plus the largest single activation.
    auto saturatingAdd = [](uint64_t &sum, uint64_t bytes) {
      sum = sum > UINT64_MAX - bytes ? UINT64_MAX : sum + bytes;
    };
    persistentBytes = 0;
    for (const PersistBuf &p : I.persist)
      saturatingAdd(persistentBytes, p.desc.bytes());
    for (const ProgramGroup &g : P.groups)
      saturatingAdd(persistentBytes, g.bytes);
    availableBytes = I.hostMemory ? hostMemoryBytes() : 0;
    if (availableBytes) {
      uint64_t persistent = persistentBytes, largest = 0;
      int largestAt = -1;
      for (const ValueInfo &vi : I.values)
        if (vi.where == Where::Arena && vi.def >= 0 &&
            vi.desc.bytes() > largest)
          largest = vi.desc.bytes(), largestAt = vi.def;
      uint64_t needed = persistent;
      saturatingAdd(needed, largest);
      uint64_t available = availableBytes;
      if (needed > available) {
        std::string what = llvm::formatv("{0} bytes of parameters, state and "
                                         "gradient buffers",
                                         persistent)
                               .str();
        if (largestAt >= 0 && I.instrs[size_t(largestAt)].op == InstrOp::Kernel)
          what +=
              llvm::formatv(" and {0} bytes for the largest activation, "
                            "the output of '{1}' ({2})",
                            largest, exec->stepInfos[size_t(largestAt)].name,
                            I.instrs[size_t(largestAt)].opType)
                  .str();
        else if (largestAt >= 0)
          what +=
              llvm::formatv(" and {0} bytes for the largest activation, "
                            "the output of '{1}'",
                            largest, exec->stepInfos[size_t(largestAt)].name)
                  .str();
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::formatv("cannot allocate {0} bytes ({1}): more than this "
                          "machine's memory ({2} bytes of RAM and swap)",
                          needed, what, available)
                .str());
      }
    }
    return llvm::Error::success();
  }

  /// The inference form of a forward node, where it has one; it shares the
  /// node's workspace.
  void createEvalKernel(Instr &instr, const OpSpec &spec) {
    std::optional<InferenceForm> form = inferenceForm(spec);
    if (!form)
      return;
    KernelOr kernel = backend.createKernel(form->spec);
    if (!kernel.ok()) {
      I.evalFallbacks.push_back(spec.name + ": " + kernel.status().message());
      return;
    }
    instr.evalKernel = std::move(*kernel);
    instr.evalIns = form->inputs;
    instr.evalOuts = form->outputs;
    instr.workspaceBytes =
        std::max(instr.workspaceBytes, instr.evalKernel->workspaceBytes());
  }

  /// One backend kernel per node.
  llvm::Error createKernels() {
    // Kernels, now that every output's use is known; their workspaces join
    // the arena plan below.
    std::vector<char> readViaAlias(I.values.size(), 0);
    for (const ValueInfo &vi : I.values)
      if (vi.where == Where::Alias && vi.used)
        readViaAlias[size_t(vi.aliasOf)] = 1;
    auto create = [&](Instr &instr) -> llvm::Error {
      OpSpec spec;
      spec.opType = instr.opType;
      spec.name = instr.name;
      spec.seed = hashName(spec.name, options.seed);
      spec.attrs = instr.attrs;
      for (int v : instr.ins) {
        spec.inputs.push_back(I.values[v].desc);
        spec.inputValues.push_back(constantBytes(v));
      }
      spec.inputs = instr.withAbsent(spec.inputs, TensorDesc{});
      spec.inputValues = instr.withAbsent(spec.inputValues, {});
      for (int v : instr.outs) {
        spec.outputs.push_back(I.values[v].desc);
        bool used = I.values[v].used || readViaAlias[size_t(v)];
        spec.outputUsed.push_back(used || I.values[v].where == Where::Group);
      }
      KernelOr kernel = backend.createKernel(spec);
      if (!kernel.ok())
        return toError(kernel.status(), nodeContext(instr));
      instr.kernel = std::move(*kernel);
      instr.workspaceBytes = instr.kernel->workspaceBytes();
      if (I.forwardEnd == 0 ||
          &instr - I.instrs.data() < std::ptrdiff_t(I.forwardEnd))
        createEvalKernel(instr, spec);
      return llvm::Error::success();
    };
    for (Instr &instr : I.instrs)
      if (instr.op == InstrOp::Kernel)
        if (llvm::Error err = create(instr))
          return err;
    for (Instr &cast : I.copyCasts)
      if (llvm::Error err = create(cast))
        return err;
    return llvm::Error::success();
  }

  /// Where every activation and workspace lives (planArena).
  llvm::Error planMemory() {
    // Arena planning (planArena, ArenaPlan.h): every arena value and kernel
    // workspace in step order, freed after its last use.
    {
      std::vector<ArenaBuffer> buffers;
      std::vector<int> bufferOf(I.values.size(), -1);
      // Which value or instruction each buffer places.
      std::vector<std::pair<bool, int>> placed; // (workspace?, value or instr)
      std::vector<char> donated(I.values.size(), 0);
      for (size_t k = 0; k < I.instrs.size(); ++k) {
        for (int v : I.instrs[k].outs) {
          ValueInfo &vi = I.values[v];
          if (vi.where != Where::Arena || vi.def != int(k))
            continue;
          ArenaBuffer buf;
          buf.def = int(k);
          int last = vi.lastUse < 0 ? vi.def : vi.lastUse;
          // Saved for backward: forward writes it, backward reads it last.
          if (k < exec->stepInfos.size() &&
              size_t(last) < exec->stepInfos.size() &&
              exec->stepInfos[k].kind == StepKind::Forward &&
              exec->stepInfos[size_t(last)].kind == StepKind::Backward) {
            exec->memStats.savedBytes += vi.desc.bytes();
            if (isLowFloat(vi.desc.dtype))
              exec->memStats.savedLowBytes += vi.desc.bytes();
          }
          buf.lastUse = last < end ? last : ArenaBuffer::kLive;
          buf.bytes = vi.desc.bytes();
          // In place: an elementwise op writes over an operand of its shape
          // that dies here (e.g. Relu over the BatchNormalization output).
          if (options.inPlace && options.reuseBuffers &&
              I.instrs[k].elementwise && I.instrs[k].outs.size() == 1)
            for (int in : I.instrs[k].ins) {
              int r = I.root(in);
              const ValueInfo &ri = I.values[size_t(r)];
              if (ri.where == Where::Arena && ri.def >= 0 &&
                  ri.lastUse == int(k) && !donated[size_t(r)] &&
                  I.values[size_t(in)].desc.shape == vi.desc.shape &&
                  ri.desc.dtype == vi.desc.dtype &&
                  ri.desc.bytes() == vi.desc.bytes()) {
                donated[size_t(r)] = 1;
                buf.donor = bufferOf[size_t(r)];
                break;
              }
            }
          bufferOf[size_t(v)] = int(buffers.size());
          buffers.push_back(buf);
          placed.push_back({false, v});
        }
        if (I.instrs[k].workspaceBytes) {
          ArenaBuffer scratch;
          scratch.def = scratch.lastUse = int(k);
          scratch.bytes = I.instrs[k].workspaceBytes;
          scratch.scratch = true;
          buffers.push_back(scratch);
          placed.push_back({true, int(k)});
        }
      }
      ArenaPlan arena = planArena(buffers, kAlign, options.reuseBuffers);
      for (size_t b = 0; b < buffers.size(); ++b) {
        auto [workspace, index] = placed[b];
        if (workspace)
          I.instrs[size_t(index)].workspaceOffset = arena.offsets[b];
        else
          I.values[size_t(index)].offset = arena.offsets[b];
      }
      I.arenaBytes = arena.bytes;
      exec->memStats.arenaBytes = arena.bytes;
      exec->memStats.unsharedBytes = arena.unsharedBytes;
    }
    return llvm::Error::success();
  }

  /// The arena, persistent tensors and group buffers.
  llvm::Error allocate() {
    // Memory. The arena is as large as the plan says, however much of it the
    // first steps touch: refuse what the machine cannot hold instead of being
    // killed by the kernel's out-of-memory killer part-way through a step.
    if (availableBytes &&
        I.arenaBytes >
            availableBytes - std::min(availableBytes, persistentBytes))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv(
              "cannot allocate {0} bytes of activations: with {1} "
              "bytes of parameters, state and gradient buffers, more "
              "than this machine's memory ({2} bytes of RAM and swap)",
              I.arenaBytes, persistentBytes, availableBytes)
              .str());
    if (I.arenaBytes) {
      I.arena = backend.allocate(I.arenaBytes);
      if (!I.arena)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot allocate %zu bytes of activations", I.arenaBytes);
    }
    for (PersistBuf &p : I.persist) {
      p.ptr = backend.allocate(std::max<size_t>(p.desc.bytes(), 1));
      if (!p.init.empty())
        backend.copyToDevice(p.ptr, p.init.data(), p.init.size());
      else if (I.hostMemory)
        std::memset(p.ptr, 0, p.desc.bytes());
      exec->memStats.persistentBytes += p.desc.bytes();
    }
    for (ProgramGroup &g : P.groups)
      I.gradSlabBytes += groupBufferBytes(g.index, g.bytes);
    if (I.gradSlabBytes) {
      I.gradSlab = I.zeroedBuffer(I.gradSlabBytes);
      if (!I.gradSlab)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "cannot allocate %zu bytes of gradients",
                                       I.gradSlabBytes);
    }
    for (ProgramGroup &g : P.groups) {
      GroupBuf b;
      b.bytes = groupBufferBytes(g.index, g.bytes);
      b.dtype = I.values[g.grads[0]].desc.dtype;
      b.ptr = static_cast<char *>(I.gradSlab) + exec->memStats.gradBytes;
      exec->memStats.gradBytes += b.bytes;
      I.groupBufs.push_back(b);
    }
    // Each reduce-scatter group's shard: 1/ranks of its buffer.
    size_t shardBytes = 0;
    for (size_t g = 0; g < I.groupBufs.size(); ++g)
      if (scatters(unsigned(g)))
        shardBytes += I.groupBufs[g].bytes / size_t(I.ranks);
    if (shardBytes) {
      I.shardSlab = I.zeroedBuffer(shardBytes);
      if (!I.shardSlab)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot allocate %zu bytes for the reduce-scatter shards",
            shardBytes);
      size_t at = 0;
      for (size_t g = 0; g < I.groupBufs.size(); ++g)
        if (scatters(unsigned(g))) {
          I.groupBufs[g].shard = static_cast<char *>(I.shardSlab) + at;
          at += I.groupBufs[g].bytes / size_t(I.ranks);
        }
      exec->memStats.gradBytes += shardBytes;
    }
    if (size_t w = Impl::wireBytesFor(exec->wire, I.groupBufs)) {
      if (!I.reserveWire(w))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot allocate %zu bytes for gradients sent as %s", w,
            gradWireName(exec->wire));
      exec->memStats.wireBytes = w;
    }
    for (size_t v = 0; v < I.values.size(); ++v) {
      ValueInfo &vi = I.values[v];
      switch (vi.where) {
      case Where::Arena:
        vi.ptr = static_cast<char *>(I.arena) + vi.offset;
        break;
      case Where::Persistent:
        vi.ptr = I.persist[size_t(vi.persistent)].ptr;
        break;
      case Where::Group:
        vi.ptr =
            static_cast<char *>(I.groupBufs[size_t(vi.group)].ptr) + vi.offset;
        break;
      case Where::Alias:
        break;
      }
    }
    for (size_t v = 0; v < I.values.size(); ++v)
      if (I.values[v].where == Where::Alias)
        I.values[v].ptr = I.values[I.root(int(v))].ptr;

    for (Instr &cast : I.copyCasts)
      I.bindRefs(cast);
    for (Instr &instr : I.instrs) {
      for (Kernel *k : {instr.kernel.get(), instr.evalKernel.get()})
        if (k && k->workspaceBytes())
          k->setWorkspace(static_cast<char *>(I.arena) + instr.workspaceOffset);
      I.bindRefs(instr);
      if (instr.op == InstrOp::Update &&
          !backend.supportsUpdate(instr.rule.algo))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "optimizer '%s' updates on the '%s' backend are not implemented",
            instr.rule.algo.c_str(), backend.name());
    }
    if (I.lossScaleValue >= 0 && !I.hostMemory)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "f16 loss scaling runs on host-memory backends; the '%s' backend "
          "has none",
          backend.name());
    return llvm::Error::success();
  }

  /// Public views, init hints, groups and gradient order.
  llvm::Error publish() {
    // Public views; device backends get the batch in host memory.
    exec->inputRef = I.ref(I.inputValue);
    if (I.labelValue >= 0)
      exec->labelRef = I.ref(I.labelValue);
    if (!I.hostMemory) {
      I.hostInput.assign(exec->inputRef.bytes(), 0);
      exec->inputRef.data = I.hostInput.data();
      if (I.labelValue >= 0) {
        I.hostLabel.assign(exec->labelRef.bytes(), 0);
        exec->labelRef.data = I.hostLabel.data();
      }
    }
    for (const ProgramTensor &pt : P.tensors) {
      PersistentTensor t;
      t.kind = pt.kind;
      t.name = pt.name;
      t.ref = I.ref(pt.value);
      t.init = pt.init;
      t.fanIn = pt.fanIn;
      exec->persistentTensors.push_back(std::move(t));
    }
    for (ProgramGroup &g : P.groups) {
      GradGroup gg;
      gg.index = g.index;
      gg.buffer.data = I.groupBufs[g.index].ptr;
      gg.buffer.desc.dtype = I.groupBufs[g.index].dtype;
      gg.buffer.desc.shape = {int64_t(I.groupBufs[g.index].bytes /
                                      dtypeSize(I.groupBufs[g.index].dtype))};
      gg.id = g.index;
      gg.bytes = g.bytes;
      gg.layer = g.layer;
      gg.wire = exec->wire;
      gg.wireScratch = exec->wire == GradWire::F32 ? nullptr : I.wireSlab;
      gg.powerSgdRank = g.powerSgdRank;
      gg.twoLevel = g.twoLevel;
      if (scatters(g.index)) {
        gg.scatterRanks = unsigned(I.ranks);
        gg.shard = I.groupBufs[g.index].shard;
      }
      exec->gradGroups.push_back(std::move(gg));
      I.gradSlots.insert(I.gradSlots.end(), g.slots.begin(), g.slots.end());
    }
    exec->nextGroupId = unsigned(P.groups.size());
    // The plan's beta is per byte on the wire; per gradient byte a 16-bit
    // wire carries half (what the planner charged).
    // Likewise the share between the nodes of a two-level group.
    if (exec->wire != GradWire::F32) {
      exec->betaS *= 0.5;
      exec->tier.interBetaS *= 0.5;
    }
    for (auto &[name, v] : I.gradOfParam)
      if (I.values[v].where == Where::Group) {
        GradGroup &gg = exec->gradGroups[size_t(I.values[v].group)];
        gg.params.push_back(name);
        if (I.values[v].desc.dtype == DType::F32)
          gg.spans.push_back({name, I.values[v].offset / sizeof(float),
                              I.values[v].desc.shape});
      }
    for (GradGroup &gg : exec->gradGroups)
      std::sort(gg.spans.begin(), gg.spans.end(),
                [](const GradGroup::Span &a, const GradGroup::Span &b) {
                  return a.offset < b.offset;
                });
    std::stable_sort(P.gradients.begin(), P.gradients.end(),
                     [](const ProgramGradient &a, const ProgramGradient &b) {
                       return a.at < b.at;
                     });
    for (const ProgramGradient &g : P.gradients)
      exec->gradInfos.push_back(
          Executor::GradInfo{g.param, g.layer, g.bytes, g.rows});
    if (I.forwardEnd == 0)
      I.forwardEnd = unsigned(I.instrs.size());
    return checkSteady();
  }

  /// Whether group `g` reduce-scatters (the plan's steady `scatter`).
  bool scatters(unsigned g) const {
    const std::vector<uint8_t> &s = exec->steadyExec.scatter;
    return g < s.size() && s[g];
  }
  /// A group buffer's bytes: 64-byte aligned; a reduce-scatter group's
  /// padded to 16 x ranks f32 elements, so each rank's block is whole.
  size_t groupBufferBytes(unsigned g, size_t bytes) const {
    size_t unit = kAlign * (scatters(g) ? size_t(I.ranks) : 1);
    return (std::max<size_t>(bytes, 4) + unit - 1) / unit * unit;
  }

  /// A steady plan's pieces and order must fit the groups; per-layer
  /// forward waits need the updates at the end of the step.
  llvm::Error checkSteady() { return exec->checkSteady(); }

  /// The bytes of value `v` when it is a small constant of the program (a
  /// Constant, or a view of one), which no step writes; else empty.
  std::vector<char> constantBytes(int v) const {
    constexpr size_t kMaxFolded = 256;
    while (v >= 0 && I.values[v].where == Where::Alias)
      v = I.values[v].aliasOf;
    if (v < 0 || I.values[v].where != Where::Persistent ||
        v == I.lossScaleValue)
      return {};
    const std::vector<char> &init = I.persist[I.values[v].persistent].init;
    return init.size() <= kMaxFolded ? init : std::vector<char>{};
  }

  /// "'Op' at LOC: ", the start of an error naming the node, as the
  /// compiler's do.
  static std::string nodeContext(const ProgramInstr &in) {
    return "'" + in.opType + "'" +
           (in.location.empty() ? "" : " at " + in.location) + ": ";
  }
  static llvm::Error nodeError(const ProgramInstr &in, const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   (nodeContext(in) + msg).str());
  }

  Program P;
  KernelBackend &backend;
  const ExecutorOptions &options;
  std::unique_ptr<Executor> exec;
  Impl &I;
  // Liveness and memory.
  int end = 0; ///< one past the last instruction
  uint64_t persistentBytes = 0, availableBytes = 0;
};

Expected<std::unique_ptr<Executor>>
Executor::create(Program program, KernelBackend &backend,
                 const ExecutorOptions &options) {
  return ExecutorLoader(std::move(program), backend, options).build();
}

} // namespace oasr::rt
