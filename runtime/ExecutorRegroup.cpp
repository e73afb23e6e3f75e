//===- ExecutorRegroup.cpp - New gradient groups, same memory -------------===//

#include "ExecutorImpl.h"

using llvm::Expected;

namespace oasr::rt {

namespace {
/// Where each gradient goes in a new grouping: one buffer per group,
/// gradients in order and 64-byte aligned, the buffers back to back.
struct Layout {
  std::vector<GroupBuf> bufs;
  std::vector<std::pair<int, size_t>> at; ///< gradient -> (group, offset)
  std::vector<size_t> dataBytes, slabAt;
  size_t slabBytes = 0;
};
} // namespace

static llvm::Error regroupError(const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "cannot regroup the gradients: " + why);
}

/// The buffers of the groups `groupEnds` cuts the grouped gradients into.
static llvm::Expected<Layout> layOut(const Executor::Impl &I,
                                     llvm::ArrayRef<unsigned> groupEnds) {
  const size_t n = I.gradSlots.size();
  Layout L;
  L.at.resize(n);
  for (size_t g = 0, i = 0; g < groupEnds.size(); ++g) {
    size_t end = 0, data = 0;
    GroupBuf b;
    b.dtype = I.values[size_t(I.gradSlots[i].slot)].desc.dtype;
    for (; i < groupEnds[g]; ++i) {
      const ValueInfo &vi = I.values[size_t(I.gradSlots[i].slot)];
      if (vi.desc.dtype != b.dtype)
        return regroupError("a fused group must hold one element type");
      end = alignUp(end);
      L.at[i] = {int(g), end};
      end += vi.desc.bytes();
      data += vi.desc.bytes();
    }
    b.bytes = alignUp(std::max<size_t>(end, 4));
    L.slabAt.push_back(L.slabBytes);
    L.slabBytes += b.bytes;
    L.bufs.push_back(b);
    L.dataBytes.push_back(data);
  }
  return L;
}

/// Puts the layout in the gradient slab (the same memory when it fits; its
/// padding, which held gradients, zeroed) and repoints every grouped value
/// at it. Fails before anything changes when memory cannot be had.
static llvm::Error place(Executor::Impl &I, Layout &L, GradWire wire,
                         size_t &wireBytes) {
  const size_t n = I.gradSlots.size();
  // Room for the largest new group on a 16-bit wire, before anything
  // changes (a failure leaves the old groups as they were).
  wireBytes = Executor::Impl::wireBytesFor(wire, L.bufs);
  if (!I.reserveWire(wireBytes))
    return regroupError(llvm::formatv("cannot allocate {0} bytes for "
                                      "gradients sent as {1}",
                                      wireBytes, gradWireName(wire)));
  const bool reuse = L.slabBytes <= I.gradSlabBytes;
  void *slab = reuse ? I.gradSlab : I.zeroedBuffer(L.slabBytes);
  if (!slab)
    return regroupError(
        llvm::formatv("cannot allocate {0} bytes", L.slabBytes));
  for (size_t g = 0; g < L.bufs.size(); ++g)
    L.bufs[g].ptr = static_cast<char *>(slab) + L.slabAt[g];
  if (reuse) {
    size_t covered = 0; // slab bytes known to hold a gradient or zeroed
    for (size_t i = 0; i < n; ++i) {
      size_t begin = L.slabAt[size_t(L.at[i].first)] + L.at[i].second;
      I.zero(static_cast<char *>(slab) + covered, begin - covered);
      covered = begin + I.values[size_t(I.gradSlots[i].slot)].desc.bytes();
    }
    I.zero(static_cast<char *>(slab) + covered, L.slabBytes - covered);
  } else {
    I.backend->deallocate(I.gradSlab);
    I.gradSlab = slab;
    I.gradSlabBytes = L.slabBytes;
  }

  // Repoint the gradients' slots and the wait results at the new buffers.
  I.groupBufs = L.bufs;
  for (size_t i = 0; i < n; ++i)
    for (int v : {I.gradSlots[i].slot, I.gradSlots[i].wait}) {
      ValueInfo &vi = I.values[size_t(v)];
      vi.group = L.at[i].first;
      vi.offset = L.at[i].second;
      vi.ptr =
          static_cast<char *>(I.groupBufs[size_t(vi.group)].ptr) + vi.offset;
    }
  for (size_t v = 0; v < I.values.size(); ++v)
    if (I.values[v].where == Where::Alias)
      I.values[v].ptr = I.values[size_t(I.root(int(v)))].ptr;
  return llvm::Error::success();
}

llvm::Error Executor::regroup(llvm::ArrayRef<unsigned> groupEnds,
                              llvm::ArrayRef<unsigned> powerSgdRanks) {
  Impl &I = *impl;
  auto fail = regroupError;
  const size_t n = I.gradSlots.size();
  if (n != gradInfos.size())
    return fail(llvm::formatv("{0} grouped gradient(s) but {1} with an "
                              "optimizer update",
                              n, gradInfos.size()));
  for (size_t g = 0; g < groupEnds.size(); ++g)
    if (groupEnds[g] <= (g ? groupEnds[g - 1] : 0) || groupEnds[g] > n)
      return fail("group ends must increase strictly up to the number of "
                  "gradients");
  if (n && (groupEnds.empty() || groupEnds.back() != n))
    return fail("the groups must cover every gradient");
  if (steadyExec.hasScatter())
    return fail("the plan reduce-scatters; its groups are not regrouped");
  if (!powerSgdRanks.empty() && powerSgdRanks.size() != groupEnds.size())
    return fail(llvm::formatv("{0} PowerSGD rank(s) for {1} group(s)",
                              powerSgdRanks.size(), groupEnds.size()));

  auto laid = layOut(I, groupEnds);
  if (!laid)
    return laid.takeError();
  Layout &L = *laid;
  size_t wireBytes = 0;
  if (llvm::Error err = place(I, L, wire, wireBytes))
    return err;
  const std::vector<std::pair<int, size_t>> &at = L.at;
  const std::vector<size_t> &dataBytes = L.dataBytes;

  // The instructions without the old starts and waits. Pack copies stay
  // where they were (their sources' lifetimes were planned with them).
  std::vector<Instr> kept;
  std::vector<PlanStepInfo> keptInfo;
  std::vector<int> newIndex(I.instrs.size(), -1);
  for (size_t k = 0; k < I.instrs.size(); ++k) {
    InstrOp op = I.instrs[k].op;
    if (op == InstrOp::Start || op == InstrOp::Wait)
      continue;
    newIndex[k] = int(kept.size());
    kept.push_back(std::move(I.instrs[k]));
    keptInfo.push_back(stepInfos[k]);
  }
  int forwardLast = I.forwardEnd ? newIndex[I.forwardEnd - 1] : -1;
  for (GradSlot &s : I.gradSlots)
    s.readyInstr = s.readyInstr >= 0 ? newIndex[size_t(s.readyInstr)] : -1;
  // A group starts after the instruction that completes its last gradient;
  // it is waited for before the first update that reads one of them.
  std::vector<int> startAfter(groupEnds.size(), -1),
      waitBefore(groupEnds.size(), int(kept.size()));
  std::vector<int> groupOfWait(I.values.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    int g = at[i].first;
    startAfter[size_t(g)] =
        std::max(startAfter[size_t(g)], I.gradSlots[i].readyInstr);
    groupOfWait[size_t(I.gradSlots[i].wait)] = g;
  }
  for (size_t k = 0; k < kept.size(); ++k)
    if (kept[k].op == InstrOp::Update)
      for (int v : kept[k].ins)
        if (int g = groupOfWait[size_t(v)]; g >= 0)
          waitBefore[size_t(g)] = std::min(waitBefore[size_t(g)], int(k));

  std::vector<GradGroup> newGroups;
  for (size_t g = 0, i = 0; g < groupEnds.size(); ++g) {
    GradGroup gg;
    gg.index = unsigned(g);
    gg.id = nextGroupId + unsigned(g);
    gg.buffer.data = I.groupBufs[g].ptr;
    gg.buffer.desc.dtype = I.groupBufs[g].dtype;
    gg.buffer.desc.shape = {
        int64_t(I.groupBufs[g].bytes / dtypeSize(I.groupBufs[g].dtype))};
    gg.bytes = dataBytes[g];
    gg.powerSgdRank = powerSgdRanks.empty() ? 0 : powerSgdRanks[g];
    int last = -1;
    for (; i < groupEnds[g]; ++i) {
      gg.params.push_back(gradInfos[i].param);
      const TensorDesc &d = I.values[size_t(I.gradSlots[i].slot)].desc;
      if (d.dtype == DType::F32)
        gg.spans.push_back(
            {gradInfos[i].param, at[i].second / sizeof(float), d.shape});
      if (I.gradSlots[i].readyInstr >= last) {
        last = I.gradSlots[i].readyInstr;
        gg.layer = gradInfos[i].layer;
      }
    }
    newGroups.push_back(std::move(gg));
  }
  nextGroupId += unsigned(groupEnds.size());

  I.instrs.clear();
  stepInfos.clear();
  auto emit = [&](Instr instr, PlanStepInfo info) {
    I.instrs.push_back(std::move(instr));
    stepInfos.push_back(std::move(info));
  };
  // Starts after, waits before the kept instruction at `position`.
  auto emitComm = [&](InstrOp op, const std::vector<int> &at, int position) {
    const char *what =
        op == InstrOp::Start ? "allreduce_start" : "allreduce_wait";
    for (size_t g = 0; g < newGroups.size(); ++g)
      if (at[g] == position) {
        Instr c;
        c.op = op;
        c.group = unsigned(g);
        emit(std::move(c),
             PlanStepInfo{llvm::formatv("{0} {1}", what, g).str(), what,
                          newGroups[g].layer, StepKind::Comm});
      }
  };
  auto emitWaits = [&](int k) { emitComm(InstrOp::Wait, waitBefore, k); };
  auto emitStarts = [&](int k) { emitComm(InstrOp::Start, startAfter, k); };
  std::vector<int> finalIndex(kept.size());
  emitStarts(-1);
  for (size_t k = 0; k < kept.size(); ++k) {
    emitWaits(int(k));
    finalIndex[k] = int(I.instrs.size());
    emit(std::move(kept[k]), std::move(keptInfo[k]));
    emitStarts(int(k));
  }
  emitWaits(int(kept.size()));
  if (forwardLast >= 0)
    I.forwardEnd = unsigned(finalIndex[size_t(forwardLast)]) + 1;
  for (GradSlot &s : I.gradSlots)
    s.readyInstr = s.readyInstr >= 0 ? finalIndex[size_t(s.readyInstr)] : -1;
  for (Instr &instr : I.instrs)
    I.bindRefs(instr);

  memStats.gradBytes = 0;
  for (const GroupBuf &b : I.groupBufs)
    memStats.gradBytes += b.bytes;
  for (GradGroup &g : newGroups) {
    g.wire = wire;
    g.wireScratch = wire == GradWire::F32 ? nullptr : I.wireSlab;
  }
  memStats.wireBytes = wireBytes;
  gradGroups = std::move(newGroups);
  // The graphs recorded the old groups' buffers: capture again.
  I.graphs.reset();
  return llvm::Error::success();
}

} // namespace oasr::rt
