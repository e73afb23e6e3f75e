//===- PlanReport.cpp - Readable summary of a planned training step -------===//
//
// Rebuilds the planner's profile and plan from the IR (costs, allreduce
// groups, oasr.plan) and prints the groups and the predicted timeline.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>

namespace mlir::oasr {
#define GEN_PASS_DEF_PLANREPORT
#include "oasr/Passes/Passes.h.inc"
#include "oasr/Support/JSON.h"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;
namespace sched = ::oasr::schedule;

namespace {
struct PlanReportPass : mlir::oasr::impl::PlanReportBase<PlanReportPass> {
  using Base::Base;
  void runOnOperation() final;

private:
  /// The plan as the IR has it: the step's profile, the recorded model, the
  /// groups of its allreduce starts and their simulated timeline.
  LogicalResult readPlan(ModuleOp module, func::FuncOp fn,
                         DictionaryAttr planAttr, struct PlanRead &R);
  void writeJson(llvm::raw_ostream &os, DictionaryAttr planAttr,
                 const struct PlanRead &R);
  void writeText(llvm::raw_ostream &os, DictionaryAttr planAttr,
                 const struct PlanRead &R);
};
} // namespace

static double getF64(DictionaryAttr d, StringRef key) {
  if (auto f = d.getAs<FloatAttr>(key))
    return f.getValueAsDouble();
  return 0;
}

static int64_t getI64(DictionaryAttr d, StringRef key) {
  if (auto i = d.getAs<IntegerAttr>(key))
    return i.getInt();
  return 0;
}

namespace {
/// One group's line of the compression table: its form, the channel time
/// of each form, the bytes it sends and why the plan chose it.
struct CompressionRow {
  std::string form, why;
  double plainUs = 0, powerSgdUs = -1;
  uint64_t wireBytes = 0;
};
} // namespace

/// The rank of `compress` ("powersgd:R" or "auto:R").
static unsigned policyRank(StringAttr compress) {
  llvm::Expected<sched::CompressPolicy> p =
      sched::parseCompressPolicy(compress.getValue());
  if (!p) {
    llvm::consumeError(p.takeError());
    return 0;
  }
  return p->rank;
}

static std::vector<CompressionRow>
compressionRows(const sched::Profile &profile, const sched::CommModel &cm,
                const sched::Plan &plan, unsigned rank) {
  std::vector<sched::ReadyGrad> ready = sched::readyOrder(profile);
  std::vector<CompressionRow> rows;
  for (unsigned k = 0; k < plan.numGroups(); ++k) {
    llvm::ArrayRef<sched::ReadyGrad> g(ready.data() + plan.groupBegin(k),
                                       plan.groupEnds[k] - plan.groupBegin(k));
    sched::FormCost plain = sched::formCost(cm, g, sched::GroupForm::plain());
    const bool chosen = plan.form(k).compressed();
    // A compressed group at its own rank; a plain one at the policy's.
    const bool raised = chosen && plan.form(k).rank > rank;
    sched::FormCost psgd = sched::formCost(
        cm, g, chosen ? plan.form(k) : sched::GroupForm::powerSGD(rank));
    CompressionRow r;
    r.form = plan.form(k).name();
    r.plainUs = plain.channelUs;
    r.wireBytes = chosen ? psgd.wireBytes : plain.wireBytes;
    if (!psgd.compressed) {
      r.why = "no matrix worth compressing (vectors, or factors over half "
              "the elements): sent as it is";
    } else {
      r.powerSgdUs = psgd.channelUs;
      r.why = llvm::formatv("{0} of {1} tensors as factors, {2:f1}x fewer "
                            "bytes; {3}",
                            psgd.compressed, g.size(),
                            double(plain.wireBytes) /
                                double(std::max<uint64_t>(psgd.wireBytes, 1)),
                            raised ? "the highest rank that keeps the step"
                            : chosen == (psgd.channelUs < plain.channelUs)
                                ? (chosen ? "the factors end sooner"
                                          : "plain ends sooner")
                                : (chosen ? "compressed as powersgd:R asks"
                                          : "plain: its factors end sooner "
                                            "but not the step"))
                  .str();
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

namespace {
/// What the report reads back from the planned module.
struct PlanRead {
  sched::Profile profile;
  sched::CommModel cm;
  bool hasModel = false; ///< the plan records an allreduce model
  sched::Plan plan;
  SmallVector<unsigned> order;          ///< gradients in ready order
  std::vector<std::string> params;      ///< their parameters, in that order
  SmallVector<AllreduceStartOp> starts; ///< the groups' starts
  sched::Timeline timeline;
  double bound = 0;
  // A steady-state plan: its period and shape.
  bool steady = false, forwardWaits = false;
  double periodUs = -1;
  int64_t pieces = 0, scattered = 0;
};
} // namespace

LogicalResult PlanReportPass::readPlan(ModuleOp module, func::FuncOp fn,
                                       DictionaryAttr planAttr, PlanRead &R) {
  FailureOr<StepAnalysis> step = StepAnalysis::build(fn);
  if (failed(step))
    return failure();
  R.profile = step->toProfile(getF64(planAttr, "update_us"));
  // A simple strategy planned without a communication model records none:
  // its groups and ready times are reported, no communication timeline.
  R.hasModel = bool(planAttr.get("alpha_s"));
  sched::CommModel &cm = R.cm;
  cm = sched::CommModel::alphaBeta(getF64(planAttr, "alpha_s"),
                                   getF64(planAttr, "beta_s_per_byte"));
  cm.groupOverheadUs = getF64(planAttr, "group_overhead_us");
  if (planAttr.get("overlap_rate"))
    cm.overlapRate = getF64(planAttr, "overlap_rate");
  if (planAttr.get("compute_rate"))
    cm.computeRate = getF64(planAttr, "compute_rate");
  if (planAttr.get("call_compute_us"))
    cm.callComputeUs = getF64(planAttr, "call_compute_us");
  // The second tier the plan sent groups over (PlanAllreduce): the same
  // rule picks the same groups' route here.
  if (auto t = planAttr.getAs<DictionaryAttr>("two_level")) {
    cm.ranks = int(getI64(t, "ranks"));
    cm.twoLevel = {int(getI64(t, "ranks_per_node")), getF64(t, "intra_alpha_s"),
                   getF64(t, "intra_beta_s_per_byte"),
                   getF64(t, "inter_alpha_s"),
                   getF64(t, "inter_beta_s_per_byte")};
    if (auto r = t.getAs<StringAttr>("route"))
      if (llvm::Expected<sched::AllreduceRoute> route =
              sched::parseAllreduceRoute(r.getValue()))
        cm.route = *route;
      else
        llvm::consumeError(route.takeError());
  }
  if (auto d = planAttr.getAs<StringAttr>("grad_dtype")) {
    llvm::Expected<sched::WireDType> wire = sched::parseWireDType(d.getValue());
    if (!wire) {
      mlir::emitError(module.getLoc(), "oasr.plan: ")
          << llvm::toString(wire.takeError());
      return failure();
    }
    cm.wire = *wire;
  }

  // The plan as the IR has it.
  R.order = step->readyOrder();
  SmallVector<unsigned> &order = R.order;
  DenseMap<Value, unsigned> readyIndex;
  for (auto [i, g] : llvm::enumerate(order))
    readyIndex[step->grads[g].value] = i;
  sched::Plan &plan = R.plan;
  if (auto s = planAttr.getAs<StringAttr>("strategy"))
    plan.strategy = s.getValue().str();
  R.starts.assign(fn.getBody().front().getOps<AllreduceStartOp>().begin(),
                  fn.getBody().front().getOps<AllreduceStartOp>().end());
  for (AllreduceStartOp start : R.starts) {
    unsigned end = 0;
    for (Value g : start.getGrads())
      end = std::max(end, readyIndex.lookup(g) + 1);
    plan.groupEnds.push_back(end);
  }
  std::vector<unsigned> ranks;
  for (AllreduceStartOp start : R.starts)
    ranks.push_back(unsigned(start.getPowersgdRank().value_or(0)));
  plan.forms = sched::formsFromRanks(ranks);
  cm.compressUsPerMac = getF64(planAttr, "compress_us_per_mac");
  cm.compressUsPerElement = getF64(planAttr, "compress_us_per_element");
  if (llvm::Error e = sched::verifyPlan(plan, order.size())) {
    fn.emitError("the allreduce groups are not a plan: ")
        << llvm::toString(std::move(e));
    return failure();
  }
  R.timeline = sched::simulate(R.profile, cm, plan);
  R.bound = sched::lowerBoundUs(R.profile, cm);
  // A steady-state plan (docs/runtime.md, "Steady-state plans"): its
  // predicted time is the steady-state model's period; the timeline and
  // bound below are the backward-only model's for the same groups.
  auto steady = planAttr.getAs<DictionaryAttr>("steady");
  R.steady = bool(steady);
  if (steady) {
    if (auto p = planAttr.getAs<FloatAttr>("predicted_iteration_us"))
      R.periodUs = p.getValueAsDouble();
    if (auto w = steady.getAs<BoolAttr>("forward_waits"))
      R.forwardWaits = w.getValue();
    auto sc = steady.getAs<DenseI64ArrayAttr>("scatter");
    if (auto p = steady.getAs<DenseI64ArrayAttr>("pieces"))
      for (auto [g, v] : llvm::enumerate(p.asArrayRef())) {
        bool rs = sc && g < sc.asArrayRef().size() && sc.asArrayRef()[g];
        (rs ? R.scattered : R.pieces) += v;
      }
  }

  for (unsigned g : order)
    R.params.push_back(step->grads[g].param);
  return success();
}

void PlanReportPass::writeJson(llvm::raw_ostream &os, DictionaryAttr planAttr,
                               const PlanRead &R) {
  llvm::json::Array groups;
  for (const sched::GroupTiming &g : R.timeline.groups) {
    llvm::json::Array names;
    for (unsigned i = g.begin; i < g.end; ++i)
      names.push_back(R.params[i]);
    groups.push_back(std::move(names));
  }
  // Without a model the timeline's communication fields are null.
  auto timed = [&](double v) -> llvm::json::Value {
    return R.hasModel ? llvm::json::Value(v) : llvm::json::Value(nullptr);
  };
  llvm::json::Value commObj =
      R.hasModel ? llvm::json::Value(llvm::json::Object{
                       {"alpha_s", R.cm.alphaS},
                       {"beta_s_per_byte", R.cm.betaSPerByte},
                       {"group_overhead_us", R.cm.groupOverheadUs},
                       {"overlap_rate", R.cm.overlapRate},
                       {"compute_rate", R.cm.computeRate},
                       {"call_compute_us", R.cm.callComputeUs}})
                 : llvm::json::Value(nullptr);
  llvm::json::Object doc{
      {"model", R.profile.model},
      {"name", R.plan.strategy},
      {"num_grads", int64_t(R.order.size())},
      {"total_bytes", int64_t(R.profile.totalBytes())},
      {"comm", std::move(commObj)},
      {"grad_dtype", sched::wireDTypeName(R.cm.wire)},
      {"iteration_us", timed(R.timeline.iterationUs)},
      {"backward_end_us", R.timeline.backwardEndUs},
      {"comm_end_us", timed(R.timeline.commEndUs)},
      {"non_overlapped_comm_us", timed(R.timeline.nonOverlappedCommUs)},
      {"overlap_ratio", timed(R.timeline.overlapRatio)},
      {"lower_bound_us",
       R.plan.compresses() ? llvm::json::Value(nullptr) : timed(R.bound)},
      {"num_groups", int64_t(R.plan.numGroups())},
      {"groups", std::move(groups)}};
  if (R.cm.twoLevelUsable()) {
    llvm::json::Array routes;
    for (AllreduceStartOp start : R.starts)
      routes.push_back(start.getTwoLevel() ? "two-level" : "flat");
    llvm::json::Object tier = sched::twoLevelJSON(R.cm.twoLevel);
    tier["route"] = sched::allreduceRouteName(R.cm.route);
    tier["groups"] = std::move(routes);
    doc["two_level"] = std::move(tier);
  }
  if (auto c = planAttr.getAs<StringAttr>("compress")) {
    llvm::json::Array forms;
    for (const CompressionRow &r :
         compressionRows(R.profile, R.cm, R.plan, policyRank(c)))
      forms.push_back(llvm::json::Object{{"form", r.form},
                                         {"plain_us", r.plainUs},
                                         {"powersgd_us", r.powerSgdUs},
                                         {"wire_bytes", int64_t(r.wireBytes)},
                                         {"why", r.why}});
    doc["compress"] = c.getValue();
    doc["forms"] = std::move(forms);
  }
  if (R.steady)
    doc["steady"] = llvm::json::Object{
        {"period_us", R.periodUs >= 0 ? llvm::json::Value(R.periodUs)
                                      : llvm::json::Value(nullptr)},
        {"forward_waits", R.forwardWaits},
        {"pieces", R.pieces + R.scattered},
        {"reduce_scatters", R.scattered}};
  os << ::oasr::formatJSON(std::move(doc), 2) << "\n";
}

void PlanReportPass::writeText(llvm::raw_ostream &os, DictionaryAttr planAttr,
                               const PlanRead &R) {
  os << llvm::formatv("oasr plan: model '{0}', strategy {1}, {2} groups, {3} "
                      "gradients, {4} bytes\n",
                      R.profile.model, R.plan.strategy, R.plan.numGroups(),
                      R.order.size(), R.profile.totalBytes());
  if (R.cm.wire != sched::WireDType::F32)
    os << "gradients travel as " << sched::wireDTypeName(R.cm.wire)
       << " (half the bytes on the wire)\n";
  if (!R.hasModel) {
    os << "comm: none (planned without a communication model; "
          "`oasr-bench comm` measures one)\n";
    os << llvm::formatv("predicted iteration: n/a (forward {0:f3}, backward "
                        "end {1:f3}, update {2:f3})\n",
                        R.timeline.forwardUs, R.timeline.backwardEndUs,
                        R.timeline.updateUs);
  } else {
    os << "comm: " << R.cm.describe() << "\n";
    os << llvm::formatv(
        "predicted iteration: {0:f3} us (forward {1:f3}, "
        "backward end {2:f3}, comm end {3:f3}, update {4:f3})\n",
        R.timeline.iterationUs, R.timeline.forwardUs, R.timeline.backwardEndUs,
        R.timeline.commEndUs, R.timeline.updateUs);
    if (R.plan.compresses())
      os << llvm::formatv("lower bound: n/a (it carries every gradient byte; "
                          "compressed groups send fewer), non-overlapped comm "
                          "{0:f3} us, overlap {1:f1}%\n",
                          R.timeline.nonOverlappedCommUs,
                          100.0 * R.timeline.overlapRatio);
    else
      os << llvm::formatv(
          "lower bound: {0:f3} us (gap {1:f2}%), non-overlapped "
          "comm {2:f3} us, overlap {3:f1}%\n",
          R.bound,
          R.bound > 0 ? 100.0 * (R.timeline.iterationUs - R.bound) / R.bound
                      : 0.0,
          R.timeline.nonOverlappedCommUs, 100.0 * R.timeline.overlapRatio);
  }
  if (R.cm.twoLevelUsable()) {
    unsigned n = llvm::count_if(
        R.starts, [](AllreduceStartOp s) { return bool(s.getTwoLevel()); });
    unsigned factors = llvm::count_if(R.starts, [](AllreduceStartOp s) {
      return s.getTwoLevel() && s.getPowersgdRank();
    });
    os << llvm::formatv(
        "two-level allreduce ({0}): {1} of {2} groups{5} (marked *: a "
        "reduce-scatter in each node of {3} ranks, an allreduce of 1/{3}{4} "
        "between the nodes, an all-gather in the node), the others one "
        "collective over every rank\n",
        sched::allreduceRouteName(R.cm.route), n, R.starts.size(),
        R.cm.twoLevel.ranksPerNode,
        R.cm.wire == sched::WireDType::F32
            ? std::string()
            : " in " + sched::wireDTypeName(R.cm.wire).str(),
        factors ? llvm::formatv(" ({0} of them PowerSGD factors, each of "
                                "their two collectives so)",
                                factors)
                      .str()
                : std::string());
  }
  if (R.steady)
    os << llvm::formatv(
        "steady-state step: period {0:f3} us ({1}, {2} allreduce(s){3} in "
        "the plan's order); the timeline above is the same groups' "
        "backward-only one\n",
        R.periodUs,
        R.forwardWaits ? "the next forward waits per layer"
                       : "the next forward waits for every group",
        R.pieces,
        R.scattered ? llvm::formatv(" and {0} reduce-scatter(s) with their "
                                    "all-gather(s)",
                                    R.scattered)
                          .str()
                    : std::string());
  os << llvm::formatv("{0,5} {1,6} {2,12} {3,12} {4,12} {5,12} {6,12}  {7}\n",
                      "group", "grads", "bytes", "buffer", "ready_us",
                      "start_us", "end_us", "after node -> gradients");
  for (auto [k, constStart] : llvm::enumerate(R.starts)) {
    AllreduceStartOp start = constStart; // op handles are values
    const sched::GroupTiming &g = R.timeline.groups[k];
    std::string buffer = start.getBufferBytes()
                             ? std::to_string(*start.getBufferBytes())
                             : std::string("-");
    Operation *after = start->getPrevNode();
    while (after && isa<AllreduceStartOp>(after))
      after = after->getPrevNode();
    std::string names;
    unsigned shown = 0;
    for (unsigned i = g.begin; i < g.end; ++i) {
      if (shown++ == 3) {
        names += llvm::formatv(", ... ({0} more)", g.end - i).str();
        break;
      }
      names += (names.empty() ? "" : ", ") + R.params[i];
    }
    std::string startUs = R.hasModel ? llvm::formatv("{0:f3}", g.startUs).str()
                                     : std::string("-");
    std::string endUs =
        R.hasModel ? llvm::formatv("{0:f3}", g.endUs).str() : std::string("-");
    os << llvm::formatv(
        "{0,5} {1,6} {2,12} {3,12} {4,12:f3} {5,12} "
        "{6,12}  {7} -> {8}\n",
        llvm::formatv("{0}{1}", start.getTwoLevel() ? "*" : "", k),
        g.end - g.begin, g.bytes, buffer, g.readyUs, startUs, endUs,
        after ? layerOf(after) : StringRef("?"), names);
  }
  if (auto c = planAttr.getAs<StringAttr>("compress")) {
    std::vector<CompressionRow> rows =
        compressionRows(R.profile, R.cm, R.plan, policyRank(c));
    unsigned n = 0;
    for (const CompressionRow &r : rows)
      n += r.form != "plain";
    StringRef from;
    if (auto f = planAttr.getAs<StringAttr>("compress_from"))
      from = f.getValue();
    os << llvm::formatv(
        "compression {0}: {1} of {2} groups send PowerSGD "
        "factors (channel time per form, model above; "
        "compute {3:e2} us/multiply-add, {4:e2} us/element{5})\n",
        c.getValue(), n, rows.size(), R.cm.compressUsPerMac,
        R.cm.compressUsPerElement,
        from == "calibration"      ? ", as oasr-bench comm measured them"
        : from == "compress-gmacs" ? ", from compress-gmacs"
        : from == "default"        ? ", the default rates"
                                   : "");
    os << llvm::formatv("{0,5} {1,12} {2,12} {3,12} {4,12}  {5}\n", "group",
                        "form", "plain_us", "powersgd_us", "wire_bytes", "why");
    for (auto [k, r] : llvm::enumerate(rows))
      os << llvm::formatv(
          "{0,5} {1,12} {2,12:f3} {3,12} {4,12}  {5}\n", k, r.form, r.plainUs,
          r.powerSgdUs >= 0 ? llvm::formatv("{0:f3}", r.powerSgdUs).str()
                            : std::string("-"),
          r.wireBytes, r.why);
  }
}

void PlanReportPass::runOnOperation() {
  markAllAnalysesPreserved();
  ModuleOp module = getOperation();
  if (format != "text" && format != "json") {
    mlir::emitError(module.getLoc(), "unknown report format '")
        << format << "' (expected 'text' or 'json')";
    return signalPassFailure();
  }
  func::FuncOp fn = getTrainStep(module, "--oasr-plan-report");
  if (!fn)
    return signalPassFailure();
  auto planAttr = module->getAttrOfType<DictionaryAttr>(kPlanAttr);
  if (!planAttr) {
    mlir::emitError(module.getLoc(),
                    "no 'oasr.plan': run --oasr-plan-allreduce first");
    return signalPassFailure();
  }
  PlanRead R;
  if (failed(readPlan(module, fn, planAttr, R)))
    return signalPassFailure();
  numGroups = R.plan.numGroups();
  numGrads = R.order.size();
  gradBytes = R.profile.totalBytes();
  if (R.hasModel) {
    predictedUs = uint64_t(std::llround(R.timeline.iterationUs));
    if (!R.plan.compresses())
      lowerBoundUs = uint64_t(std::llround(R.bound));
  }

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(output, &error);
  if (!file) {
    mlir::emitError(module.getLoc(), "cannot write the plan report: ") << error;
    return signalPassFailure();
  }
  if (format == "json")
    writeJson(file->os(), planAttr, R);
  else
    writeText(file->os(), planAttr, R);
  file->keep();
}
