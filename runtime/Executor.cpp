//===- Executor.cpp - Running a compiled training step --------------------===//
//
// Executor::create (ExecutorCreate.cpp) loads a compiled Program: a flat
// list of instructions on the storage it assigned; this file runs that
// list every step without touching IR: kernels, gradient packing, allreduce
// starts and waits through the step's hooks, optimizer updates (now or,
// under a steady plan's per-layer waits, in the next step), CUDA graph
// replay, and the forward pass alone for evaluation.
//
//===----------------------------------------------------------------------===//

#include "ExecutorImpl.h"

using llvm::Expected;

namespace oasr::rt {

StepHooks::~StepHooks() = default;

Executor::Executor() : impl(std::make_unique<Impl>()) {}
Executor::~Executor() = default;

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

KernelBackend &Executor::backend() const { return *impl->backend; }

int64_t Executor::batch() const {
  return inputRef.desc.rank() ? inputRef.desc.shape[0] : 1;
}

int64_t Executor::inputVocab() const { return impl->inputVocab; }

int64_t Executor::numClasses() const {
  if (impl->scoresValue < 0)
    return 0;
  const TensorDesc &d = impl->values[size_t(impl->scoresValue)].desc;
  return d.rank() == 2 ? d.shape[1] : 0;
}

/// A skipped update (non-finite scaled gradients): every result keeps its
/// operand's value.
static void keepState(const Instr &u) {
  for (size_t k = 0; k < u.outRefs.size(); ++k) {
    size_t in = k == 0 ? 0 : k + 1; // param, grad, state...
    if (in < u.inRefs.size() && u.outRefs[k].data != u.inRefs[in].data)
      std::memcpy(u.outRefs[k].data, u.inRefs[in].data, u.outRefs[k].bytes());
  }
}

void Executor::Impl::decideScaledStep(StepHooks &hooks) {
  for (size_t g = 0; g < groupBufs.size(); ++g)
    if (!stepWaited[g]) {
      hooks.gradientsNeeded(unsigned(g));
      stepWaited[g] = 1;
    }
  stepDecided = true;
  if (lossScaleValue < 0) {
    clipGradients();
    return;
  }
  bool finite = true;
  for (const GroupBuf &b : groupBufs) {
    const float *f = static_cast<const float *>(b.ptr);
    for (size_t i = 0, n = b.bytes / sizeof(float); i < n; ++i)
      finite &= std::isfinite(f[i]);
  }
  stepSkipped = !finite;
  if (stepSkipped)
    return;
  const float unscale = float(1.0 / scaler.scale);
  for (const GroupBuf &b : groupBufs) {
    float *f = static_cast<float *>(b.ptr);
    for (size_t i = 0, n = b.bytes / sizeof(float); i < n; ++i)
      f[i] *= unscale;
  }
  clipGradients();
}

void Executor::Impl::clipGradients() {
  gradNorm = -1;
  if (scalars.clipNorm <= 0)
    return;
  // The groups hold every gradient once (padding is zeros): the sum of
  // squares in blocks of f32 added in double, as the norm kernels sum.
  const bool host = backend->hostAddressable();
  std::vector<float> staged;
  double sum = 0;
  for (const GroupBuf &b : groupBufs) {
    const size_t n = b.bytes / sizeof(float);
    const float *f = static_cast<const float *>(b.ptr);
    if (!host) {
      staged.resize(n);
      backend->copyToHost(staged.data(), b.ptr, b.bytes);
      f = staged.data();
    }
    for (size_t i0 = 0; i0 < n; i0 += 256) {
      float acc = 0;
      for (size_t i = i0, i1 = std::min(n, i0 + 256); i < i1; ++i)
        acc += f[i] * f[i];
      sum += acc;
    }
  }
  gradNorm = std::sqrt(sum);
  const double coef = scalars.clipNorm / (gradNorm + 1e-6);
  if (!(coef < 1))
    return;
  const float c = float(coef);
  for (const GroupBuf &b : groupBufs) {
    const size_t n = b.bytes / sizeof(float);
    float *f = static_cast<float *>(b.ptr);
    if (!host) {
      staged.resize(n);
      backend->copyToHost(staged.data(), b.ptr, b.bytes);
      f = staged.data();
    }
    for (size_t i = 0; i < n; ++i)
      f[i] *= c;
    if (!host)
      backend->copyToDevice(b.ptr, staged.data(), b.bytes);
  }
}

/// Runs `fn` on the f32 elements of `bytes` at `dev` (backend memory)
/// and, for a device backend, `acc` (host staging copies both ways).
template <typename Fn>
static void onHost(Executor::Impl &I, void *dev, void *acc, size_t bytes,
                   std::vector<float> &a, std::vector<float> &b, Fn fn) {
  const size_t n = bytes / sizeof(float);
  if (I.hostMemory)
    return fn(static_cast<float *>(dev), static_cast<float *>(acc), n);
  a.resize(n);
  b.resize(n);
  I.backend->copyToHost(a.data(), dev, bytes);
  I.backend->copyToHost(b.data(), acc, bytes);
  fn(a.data(), b.data(), n);
  I.backend->copyToDevice(dev, a.data(), bytes);
  I.backend->copyToDevice(acc, b.data(), bytes);
}

void Executor::Impl::accumulateGroups() {
  const bool first = microBatches == 0;
  std::vector<float> a, b;
  for (const GroupBuf &g : groupBufs) {
    void *acc = static_cast<char *>(accSlab) +
                (static_cast<char *>(g.ptr) - static_cast<char *>(gradSlab));
    onHost(*this, g.ptr, acc, g.bytes, a, b,
           [&](float *grad, float *sum, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
             for (size_t i = 0; i < n; ++i)
               sum[i] = first ? grad[i] : sum[i] + grad[i];
           });
  }
  ++microBatches;
}

void Executor::Impl::foldAccumulated(unsigned group) {
  const GroupBuf &g = groupBufs[group];
  void *acc = static_cast<char *>(accSlab) +
              (static_cast<char *>(g.ptr) - static_cast<char *>(gradSlab));
  const float scale = 1.0f / float(microBatches + 1);
  std::vector<float> a, b;
  onHost(*this, g.ptr, acc, g.bytes, a, b,
         [&](float *grad, float *sum, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
           for (size_t i = 0; i < n; ++i)
             grad[i] = (sum[i] + grad[i]) * scale;
         });
}

llvm::Error Executor::runMicroBatch() {
  Impl &I = *impl;
  if (I.deferUpdates)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "gradient accumulation needs each step's updates inside the step; "
        "this steady-state plan runs them inside the next forward (plan "
        "without per-layer forward waits)");
  for (const GroupBuf &g : I.groupBufs)
    if (g.dtype != DType::F32)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "gradient accumulation sums f32 gradient groups; this program's "
          "groups hold %s",
          dtypeName(g.dtype));
  if (I.accBytes < I.gradSlabBytes) {
    if (I.accSlab)
      I.backend->deallocate(I.accSlab);
    I.accSlab = I.backend->allocate(I.gradSlabBytes);
    if (!I.accSlab)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cannot allocate %zu bytes for the accumulated gradients",
          I.gradSlabBytes);
    I.accBytes = I.gradSlabBytes;
  }
  I.uploadBatch();
  I.refreshCopies();
  if (I.lossScaleValue >= 0) {
    float scale = float(I.scaler.scale);
    I.backend->copyToDevice(I.ref(I.lossScaleValue).data, &scale, sizeof scale);
  }
  for (Instr &instr : I.instrs) {
    if (instr.op == InstrOp::Kernel)
      instr.kernel->run(instr.inRefs, instr.outRefs);
    else if (instr.op == InstrOp::Copy)
      for (auto [dst, src] : instr.copies)
        I.copy(dst, src);
  }
  I.backend->synchronize();
  I.accumulateGroups();
  return llvm::Error::success();
}

int64_t Executor::accumulatedMicroBatches() const { return impl->microBatches; }

void Executor::setStepScalars(const StepScalars &s) { impl->scalars = s; }
double Executor::lastGradNorm() const { return impl->gradNorm; }
double Executor::baseLearningRate() const {
  for (const Instr &in : impl->instrs)
    if (in.op == InstrOp::Update)
      return in.rule.lr;
  return 0;
}

std::pair<size_t, size_t> pieceSpan(const GradGroup &g, unsigned piece,
                                    unsigned pieces) {
  size_t total = size_t(g.buffer.numel());
  size_t unit = g.scatterRanks ? kAlign / sizeof(float) * g.scatterRanks : 1;
  pieces = std::max(pieces, 1u);
  size_t each = total / unit / pieces * unit;
  size_t first = each * piece;
  return {first, piece + 1 == pieces ? total - first : each};
}

void Executor::completeUpdates(StepHooks &hooks) {
  Impl &I = *impl;
  if (!I.updatesPending)
    return;
  for (size_t u = 0; u < I.instrs.size(); ++u)
    if (I.instrs[u].op == InstrOp::Update)
      I.runDeferredUpdate(hooks, unsigned(u), nullptr, nullptr);
  I.updatesPending = false;
  I.backend->synchronize();
}

void Executor::runStep(StepHooks &hooks, OpTiming *timings, int64_t epochNs) {
  Impl &I = *impl;
  auto now = [&] {
    return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count() -
                  epochNs) *
           1e-3;
  };
  I.uploadBatch();
  I.refreshCopies();
  const bool defer = I.deferUpdates;
  const bool scaling = I.lossScaleValue >= 0;
  const bool deciding = I.decidesStep();
  if (scaling) {
    float s = float(I.scaler.scale);
    I.backend->copyToDevice(I.ref(I.lossScaleValue).data, &s, sizeof s);
  }
  if (deciding) {
    I.stepDecided = false;
    I.stepSkipped = false;
    I.stepWaited.assign(I.groupBufs.size(), 0);
  }
  if (defer && timings) {
    // The first step has no updates left over: its waits and updates take
    // no time.
    double t = now();
    for (size_t k = 0; k < I.instrs.size(); ++k)
      if (I.instrs[k].op == InstrOp::Wait || I.instrs[k].op == InstrOp::Update)
        timings[k] = {t, t};
  }
  std::function<double()> clock = now;
  if (I.deviceGraphs && !I.graphs)
    I.planGraphs();
  if (I.graphs)
    I.graphs->beginStep();
  auto runOne = [&](size_t j) {
    Instr &in = I.instrs[j];
    if (in.op == InstrOp::Kernel)
      in.kernel->run(in.inRefs, in.outRefs);
    else
      for (auto [dst, src] : in.copies)
        I.copy(dst, src);
  };
  for (size_t k = 0; k < I.instrs.size(); ++k) {
    Instr &instr = I.instrs[k];
    if (defer && I.updatesPending)
      for (unsigned u : I.updatesBefore[k])
        I.runDeferredUpdate(hooks, u, timings, &clock);
    if (defer && (instr.op == InstrOp::Wait || instr.op == InstrOp::Update))
      continue; // the next step runs them
    double t0 = timings ? now() : 0;
    if (I.graphs) {
      size_t end = I.graphs->run(k, *I.backend, runOne);
      if (end != k) { // replayed [k, end): its launch time on the first
        if (timings) {
          double t1 = now();
          timings[k] = {t0, t1};
          for (size_t j = k + 1; j < end; ++j)
            timings[j] = {t1, t1};
        }
        k = end - 1;
        continue;
      }
    }
    switch (instr.op) {
    case InstrOp::Kernel:
    case InstrOp::Copy:
      runOne(k);
      break;
    case InstrOp::Start:
      // A device communicator that waits on an event needs no host sync
      // here: one per group would stall the GPU 40-100 times a step.
      if (!hooks.ordersAfterDevice() || I.microBatches)
        I.backend->synchronize();
      if (I.microBatches)
        I.foldAccumulated(instr.group);
      hooks.gradientsReady(instr.group);
      break;
    case InstrOp::Wait:
      if (deciding && I.stepWaited[instr.group])
        break; // waited for to decide the step
      hooks.gradientsNeeded(instr.group);
      if (deciding)
        I.stepWaited[instr.group] = 1;
      break;
    case InstrOp::Update:
      if (deciding && !I.stepDecided)
        I.decideScaledStep(hooks);
      if (scaling && I.stepSkipped)
        keepState(instr);
      else
        I.backend->update(I.scaledRule(instr.rule), I.updatesDone, instr.inRefs,
                          instr.outRefs);
      break;
    }
    if (timings) {
      timings[k].startUs = t0;
      timings[k].endUs = now();
    }
  }
  I.microBatches = 0;
  if (defer) {
    I.updatesPending = true;
    I.pendingT = I.updatesDone;
    std::fill(I.waited.begin(), I.waited.end(), 0);
  }
  // A skipped step is no optimizer step (Adam's bias correction counts the
  // updates applied); the scaler backs off or grows.
  if (scaling && I.stepDecided) {
    I.scaler.update(!I.stepSkipped);
    if (I.stepSkipped) {
      I.backend->synchronize();
      return;
    }
  }
  ++I.updatesDone;
  I.backend->synchronize();
}

bool Executor::scalesLoss() const { return impl->lossScaleValue >= 0; }

GraphStats Executor::graphStats() const {
  if (impl->graphs)
    return impl->graphs->stats();
  GraphStats none;
  none.instrs = impl->instrs.size();
  return none;
}
LossScaler &Executor::lossScaler() { return impl->scaler; }
bool Executor::lastStepSkipped() const {
  return impl->lossScaleValue >= 0 && impl->stepDecided && impl->stepSkipped;
}

void Executor::Impl::runDeferredUpdate(StepHooks &hooks, unsigned u,
                                       OpTiming *timings,
                                       const std::function<double()> *now) {
  const int g = updateGroup[u];
  if (g >= 0 && !waited[size_t(g)]) {
    double t0 = timings ? (*now)() : 0;
    hooks.gradientsNeeded(unsigned(g));
    waited[size_t(g)] = 1;
    if (timings && waitInstr[size_t(g)] >= 0)
      timings[waitInstr[size_t(g)]] = {t0, (*now)()};
  }
  double t0 = timings ? (*now)() : 0;
  Instr &instr = instrs[u];
  backend->update(scaledRule(instr.rule), pendingT, instr.inRefs,
                  instr.outRefs);
  if (timings)
    timings[u] = {t0, (*now)()};
}

/// Where each step's deferred updates run under per-layer forward waits:
/// before the first instruction that reads the parameter or state they
/// write (byte ranges: views and aliases count), else before the step's
/// first instruction.
llvm::Error planDeferredUpdates(Executor::Impl &I,
                                const std::vector<PlanStepInfo> &steps) {
  const size_t n = I.instrs.size();
  I.updatesBefore.assign(n, {});
  I.updateGroup.assign(n, -1);
  I.waitInstr.assign(I.groupBufs.size(), -1);
  I.waited.assign(I.groupBufs.size(), 0);
  auto overlaps = [](const void *a, size_t an, const void *b, size_t bn) {
    auto pa = reinterpret_cast<uintptr_t>(a),
         pb = reinterpret_cast<uintptr_t>(b);
    return an && bn && pa < pb + bn && pb < pa + an;
  };
  auto groupOf = [&](const TensorRef &r) {
    for (size_t g = 0; g < I.groupBufs.size(); ++g)
      if (overlaps(r.data, r.bytes(), I.groupBufs[g].ptr, I.groupBufs[g].bytes))
        return int(g);
    return -1;
  };
  // What each instruction reads, as byte ranges.
  auto reads = [&](const Instr &instr, const void *p, size_t bytes) {
    if (instr.op == InstrOp::Copy) {
      for (auto [dst, src] : instr.copies)
        if (overlaps(I.values[size_t(src)].ptr,
                     I.values[size_t(src)].desc.bytes(), p, bytes))
          return true;
      return false;
    }
    for (const TensorRef &r : instr.inRefs)
      if (overlaps(r.data, r.bytes(), p, bytes))
        return true;
    return false;
  };
  bool afterWait = false;
  for (size_t k = 0; k < n; ++k) {
    const Instr &instr = I.instrs[k];
    if (instr.op == InstrOp::Wait) {
      I.waitInstr[instr.group] = int(k);
      afterWait = true;
      continue;
    }
    // After the waits only updates read what the allreduces and updates
    // wrote; anything else (the BN statistics' write-back) stays in place.
    auto readsGradientsOrUpdated = [&] {
      for (const GroupBuf &b : I.groupBufs)
        if (reads(instr, b.ptr, b.bytes))
          return true;
      // (A parameter's 16-bit copy, Instr::weightCopy, is not: a reader
      // before the deferred update reads the copy of the old parameter.)
      for (const Instr &u : I.instrs)
        if (u.op == InstrOp::Update)
          for (size_t k = 0; k < u.outs.size(); ++k)
            if (reads(instr, u.outRefs[k].data, u.outRefs[k].bytes()))
              return true;
      return false;
    };
    if (afterWait && instr.op != InstrOp::Update && readsGradientsOrUpdated())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "per-layer forward waits: '%s' (%s, after the step's first "
          "allreduce_wait) is not an optimizer update, so the step cannot "
          "leave its updates to the next step",
          k < steps.size() ? steps[k].name.c_str() : "?",
          k < steps.size() ? steps[k].opType.c_str() : "?");
    if (instr.op != InstrOp::Update)
      continue;
    for (const TensorRef &r : instr.inRefs)
      if (int g = groupOf(r); g >= 0) {
        I.updateGroup[k] = g;
        break;
      }
    size_t at = 0;
    bool found = false;
    for (size_t j = 0; j < n && !found; ++j) {
      const Instr &reader = I.instrs[j];
      if (reader.op != InstrOp::Kernel && reader.op != InstrOp::Copy)
        continue;
      for (const TensorRef &w : instr.outRefs)
        if (reads(reader, w.data, w.bytes())) {
          at = j;
          found = true;
          break;
        }
    }
    I.updatesBefore[at].push_back(unsigned(k));
  }
  return llvm::Error::success();
}

/// The plan's steady execution (oasr.plan's `steady`) against the groups
/// it orders: counts, forms and the order checked before any step; per-layer
/// forward waits place the deferred updates.
llvm::Error Executor::checkSteady() {
  Impl &I = *impl;
  SteadyExecution &se = steadyExec;
  const size_t G = gradGroups.size();
  auto bad = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "oasr.plan's steady execution: " + why);
  };
  if (se.pieces.empty() && se.order.empty() && !se.forwardWaits &&
      se.scatter.empty())
    return llvm::Error::success();
  if (se.pieces.size() != G)
    return bad(llvm::formatv("{0} piece count(s) for {1} group(s)",
                             se.pieces.size(), G));
  if (se.scatter.empty())
    se.scatter.assign(G, 0);
  if (se.scatter.size() != G)
    return bad(llvm::formatv("{0} collective form(s) for {1} group(s)",
                             se.scatter.size(), G));
  if (se.hasScatter() && wire != GradWire::F32)
    return bad(llvm::formatv("reduce-scatter groups travel in f32; the "
                             "plan sends gradients as {0}",
                             gradWireName(wire)));
  for (size_t g = 0; g < G; ++g)
    if (se.scatter[g] && I.groupBufs[g].dtype != DType::F32)
      return bad(llvm::formatv("group {0} reduce-scatters {1} gradients; "
                               "only f32 ones are",
                               g, dtypeName(I.groupBufs[g].dtype)));
  std::set<std::pair<unsigned, unsigned>> seen;
  size_t units = 0;
  for (unsigned p : se.pieces) {
    if (p == 0)
      return bad("a group is cut into 0 pieces");
    units += p;
  }
  std::set<std::pair<unsigned, unsigned>> gathered;
  for (const SteadyExecution::Unit &u : se.order) {
    if (u.group >= G || u.piece >= se.pieces[u.group] ||
        (u.gather && !se.scatter[u.group]) ||
        (u.gather && !seen.count({u.group, u.piece})) ||
        !(u.gather ? gathered : seen).insert({u.group, u.piece}).second)
      return bad(llvm::formatv("the order names group {0} piece {1}{2} "
                               "twice, out of range or before its "
                               "reduce-scatter",
                               u.group, u.piece,
                               u.gather ? " (all-gather)" : ""));
  }
  size_t gathers = 0;
  for (size_t g = 0; g < G; ++g)
    gathers += se.scatter[g] ? se.pieces[g] : 0;
  if (gathered.size() != gathers)
    return bad(llvm::formatv("the order has {0} of the {1} all-gathers",
                             gathered.size(), gathers));
  if (seen.size() != units)
    return bad(llvm::formatv("the order has {0} of the {1} pieces", seen.size(),
                             units));
  if (se.forwardWaits) {
    if (I.lossScaleValue >= 0)
      return bad("its next forward waits per layer, and an f16 step's loss "
                 "scaling decides the whole step's updates on every "
                 "gradient first; plan it with a backward-only strategy "
                 "(--strategy=oasr) or use --precision=bf16");
    I.deferUpdates = true;
    return planDeferredUpdates(I, stepInfos);
  }
  return llvm::Error::success();
}

std::vector<PersistentTensor> &Executor::persistent() {
  impl->copiesStale = true;
  return persistentTensors;
}

void Executor::runForward(ForwardMode mode) {
  Impl &I = *impl;
  I.uploadBatch();
  I.refreshCopies();
  const bool eval = mode == ForwardMode::Eval;
  for (unsigned k = 0; k < I.forwardEnd && k < I.instrs.size(); ++k) {
    Instr &instr = I.instrs[k];
    if (instr.op != InstrOp::Kernel)
      continue;
    if (eval && instr.evalKernel) {
      std::vector<TensorRef> ins(instr.inRefs.begin(),
                                 instr.inRefs.begin() + instr.evalIns),
          outs(instr.outRefs.begin(), instr.outRefs.begin() + instr.evalOuts);
      instr.evalKernel->run(ins, outs);
    } else {
      instr.kernel->run(instr.inRefs, instr.outRefs);
    }
  }
  I.backend->synchronize();
}

const std::vector<std::string> &Executor::evalFallbacks() const {
  return impl->evalFallbacks;
}

void Executor::setPlanModel(double predictedIterationUs, double alpha,
                            double beta, double overheadUs, double rate) {
  predictedUs = predictedIterationUs;
  alphaS = alpha;
  betaS = beta;
  groupOverheadUs = overheadUs;
  overlapRate = rate;
}

int64_t Executor::updateCount() const { return impl->updatesDone; }

void Executor::setUpdateCount(int64_t t) { impl->updatesDone = t; }

std::string Executor::optimizerName() const {
  std::vector<std::string> names;
  for (const Instr &instr : impl->instrs) {
    if (instr.op != InstrOp::Update)
      continue;
    std::string n = instr.rule.algo + (instr.rule.nesterov ? "+nesterov" : "");
    if (!llvm::is_contained(names, n))
      names.push_back(n);
  }
  return llvm::join(names, ",");
}

std::vector<uint64_t> Executor::randomPositions() const {
  std::vector<uint64_t> positions;
  for (const Instr &instr : impl->instrs) {
    uint64_t p = 0;
    if (instr.op == InstrOp::Kernel && instr.kernel->randomPosition(p))
      positions.push_back(p);
  }
  return positions;
}

llvm::Error
Executor::setRandomPositions(const std::vector<uint64_t> &positions) {
  size_t k = 0;
  for (Instr &instr : impl->instrs) {
    uint64_t p = 0;
    if (instr.op != InstrOp::Kernel || !instr.kernel->randomPosition(p))
      continue;
    if (k < positions.size())
      instr.kernel->setRandomPosition(positions[k]);
    ++k;
  }
  if (k != positions.size())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%zu random-number position(s) given, the model has %zu kernel(s) "
        "that draw random numbers",
        positions.size(), k);
  return llvm::Error::success();
}

} // namespace oasr::rt
