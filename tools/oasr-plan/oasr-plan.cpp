//===- oasr-plan.cpp - Plan gradient allreduce merging on a profile -------===//
//
// oasr-plan PROFILE.json --strategy=all|NAME[,NAME...]
//   [--alpha=S --beta=S_PER_BYTE | --comm=CALIBRATION.json] [--ranks=P]
//   [--compute-scale=F] [--format=table|json] [--trace=F.json] [--svg=F.svg]
//
// Scores every requested strategy with the one simulator of lib/Schedule and
// prints a table (or JSON); optionally writes a Chrome trace and an SVG
// Gantt chart of the timelines. docs/planner.md describes the model.
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Schedule/Render.h"
#include "oasr/Schedule/Schedule.h"
#include "oasr/Schedule/Steady.h"
#include "oasr/Support/JSON.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <optional>

using namespace llvm;
using namespace oasr::schedule;

namespace {
enum class OutputFormat { Table, JSON };

cl::OptionCategory planCat("oasr-plan options");

cl::opt<std::string> profilePath(cl::Positional, cl::Required,
                                 cl::desc("<profile.json>"), cl::cat(planCat));
cl::opt<std::string>
    strategyOpt("strategy",
                cl::desc("Strategies to score: 'all' or a comma-separated list "
                         "of wfbp, single, ddp, horovod, mgwfbp, optimal, "
                         "oasr, bucket:<bytes>"),
                cl::init("all"), cl::cat(planCat));
cl::opt<double> alphaOpt("alpha",
                         cl::desc("Allreduce start-up time alpha (seconds); "
                                  "with --ranks, the per-step ring latency"),
                         cl::cat(planCat));
cl::opt<double> betaOpt("beta",
                        cl::desc("Allreduce time per byte beta (seconds/byte); "
                                 "with --ranks, the inverse link bandwidth"),
                        cl::cat(planCat));
cl::opt<std::string> commOpt("comm",
                             cl::desc("Calibration JSON written by "
                                      "'oasr-bench comm' (oasr-comm-v1)"),
                             cl::value_desc("file"), cl::cat(planCat));
cl::opt<int> ranksOpt(
    "ranks",
    cl::desc("Use the ring form over P ranks: T(M) = 2(P-1) alpha + "
             "2(P-1)/P beta M, with --alpha/--beta as per-step values"),
    cl::value_desc("P"), cl::cat(planCat));
cl::opt<double> overheadOpt(
    "group-overhead-us",
    cl::desc("Extra fixed cost per communicated group (microseconds): "
             "launch, wait and per-group optimizer launch"),
    cl::cat(planCat));
cl::opt<double>
    packOpt("pack-us-per-byte",
            cl::desc("Packing copy cost for multi-tensor groups when "
                     "gradients are not contiguous (microseconds per byte)"),
            cl::cat(planCat));
cl::opt<double> overlapOpt(
    "overlap-rate",
    cl::desc("Rate in [0, 1] at which communication progresses while "
             "backward computes (1: its own channel; 0: only after backward)"),
    cl::value_desc("F"), cl::cat(planCat));
cl::opt<std::string> gradDtypeOpt(
    "grad-dtype",
    cl::desc("Element type gradients travel in: f32 (default), or bf16 / f16 "
             "(half the bytes on the wire: beta counts half per gradient "
             "byte; alpha stays)"),
    cl::value_desc("f32|bf16|f16"), cl::init("f32"), cl::cat(planCat));
cl::opt<std::string> compressOpt(
    "compress",
    cl::desc("What groups may send: off (default), powersgd:R or "
             "auto[:R[-M]] (PowerSGD factors where the model says they end "
             "sooner, at rank R raised up to M where the step hides it; "
             "docs/compression.md)"),
    cl::value_desc("off|powersgd:R|auto[:R[-M]]"), cl::init("off"),
    cl::cat(planCat));
cl::opt<std::string> twoLevelOpt(
    "two-level",
    cl::desc("Allreduce per group where the calibration has a second tier "
             "(ranks sharing nodes): auto (default: the faster for its "
             "size), flat, or two-level (docs/compression.md)"),
    cl::value_desc("auto|flat|two-level"), cl::init("auto"), cl::cat(planCat));
cl::opt<double> compressGmacsOpt(
    "compress-gmacs",
    cl::desc("Multiply-adds per second (1e9) of compression on the "
             "communication thread (default: one core of the build "
             "machine's oneDNN rate)"),
    cl::init(-1), cl::cat(planCat));
cl::opt<double> computeScale("compute-scale",
                             cl::desc("Multiply every compute time by F "
                                      "(0.05 asks: what on a 20x faster GPU)"),
                             cl::init(1.0), cl::value_desc("F"),
                             cl::cat(planCat));
cl::opt<OutputFormat> formatOpt(
    "format", cl::desc("Output format"),
    cl::values(clEnumValN(OutputFormat::Table, "table",
                          "human-readable table (default)"),
               clEnumValN(OutputFormat::JSON, "json", "machine-readable JSON")),
    cl::init(OutputFormat::Table), cl::cat(planCat));
cl::opt<std::string> steadyOpt(
    "steady", cl::ValueOptional,
    cl::desc("Also plan the whole steady-state step (docs/planner.md, \"The "
             "steady-state step\"): 'all' (the default value) or a "
             "comma-separated list of oasr-step, oasr-barrier, "
             "bytescheduler[:<bytes>], dear[:<bytes>]"),
    cl::value_desc("strategies"), cl::cat(planCat));
cl::opt<std::string> steadyUpdateOpt(
    "steady-update",
    cl::desc("Where a reduce-scatter group's update runs in --steady: "
             "'lane' (default; DeAR's form, what oasr-run runs: the "
             "all-gather carries the averaged gradients and the compute "
             "lane updates) or 'shard' (ZeRO's form: the communication "
             "thread updates its 1/P shard between the halves and the "
             "all-gather carries the parameters)"),
    cl::init("lane"), cl::value_desc("lane|shard"), cl::cat(planCat));
cl::opt<std::string> traceOpt("trace",
                              cl::desc("Write a Chrome trace (Perfetto) of "
                                       "the scored timelines"),
                              cl::value_desc("file.json"), cl::cat(planCat));
cl::opt<std::string> svgOpt("svg",
                            cl::desc("Write an SVG Gantt chart of the scored "
                                     "timelines"),
                            cl::value_desc("file.svg"), cl::cat(planCat));

/// Prints "oasr-plan: error: MSG" and returns the exit code.
int fail(const Twine &msg) {
  WithColor::error(errs(), "oasr-plan") << msg << "\n";
  return 1;
}

/// The communication model from the command line, else the profile.
Expected<CommModel> chooseComm(const Profile &profile) {
  auto err = [](const Twine &msg) {
    return createStringError(inconvertibleErrorCode(), msg);
  };
  bool hasAlpha = alphaOpt.getNumOccurrences(),
       hasBeta = betaOpt.getNumOccurrences();
  if (hasAlpha != hasBeta)
    return err(hasAlpha ? "--alpha needs --beta" : "--beta needs --alpha");
  if (hasAlpha && !commOpt.empty())
    return err("--alpha/--beta and --comm are mutually exclusive");
  if (hasAlpha && (alphaOpt < 0 || betaOpt < 0))
    return err("--alpha and --beta must be >= 0");
  if (ranksOpt.getNumOccurrences()) {
    if (!hasAlpha)
      return err("--ranks needs --alpha and --beta (the per-step ring "
                 "latency and inverse bandwidth)");
    if (ranksOpt < 1)
      return err("--ranks must be >= 1");
  }
  CommModel m;
  if (hasAlpha) {
    if (ranksOpt.getNumOccurrences())
      m = CommModel::ring(ranksOpt, alphaOpt,
                          betaOpt > 0 ? 1.0 / betaOpt : 0.0);
    else
      m = CommModel::alphaBeta(alphaOpt, betaOpt);
  } else if (!commOpt.empty()) {
    Expected<CommModel> c = readCalibration(commOpt);
    if (!c)
      return c.takeError();
    m = *c;
  } else if (profile.comm) {
    m = *profile.comm;
  } else {
    return err("no communication model: give --alpha and --beta, --comm, or "
               "a 'comm' object in the profile");
  }
  if (overheadOpt.getNumOccurrences()) {
    if (overheadOpt < 0)
      return err("--group-overhead-us must be >= 0");
    m.groupOverheadUs = overheadOpt;
  }
  if (packOpt.getNumOccurrences()) {
    if (packOpt < 0)
      return err("--pack-us-per-byte must be >= 0");
    m.packUsPerByte = packOpt;
  }
  Expected<WireDType> wire = parseWireDType(gradDtypeOpt);
  if (!wire)
    return err("--grad-dtype=" + gradDtypeOpt + ": " +
               toString(wire.takeError()));
  m.wire = *wire;
  if (overlapOpt.getNumOccurrences()) {
    if (!(overlapOpt >= 0 && overlapOpt <= 1))
      return err("--overlap-rate must be in [0, 1]");
    m.overlapRate = overlapOpt;
  }
  return m;
}

/// The requested strategy names, validated.
Expected<std::vector<std::string>> chooseStrategies() {
  std::vector<std::string> out;
  SmallVector<StringRef> parts;
  StringRef(strategyOpt).split(parts, ',');
  for (StringRef part : parts) {
    part = part.trim();
    if (part == "all") {
      for (const std::string &s : strategyNames())
        out.push_back(s);
      continue;
    }
    if (Error e = checkStrategy(part))
      return createStringError(inconvertibleErrorCode(),
                               "--strategy: " + toString(std::move(e)));
    out.push_back(part.str());
  }
  return out;
}

Error writeFile(StringRef path, StringRef what, StringRef text) {
  std::error_code ec;
  ToolOutputFile file(path, ec, sys::fs::OF_Text);
  if (ec)
    return createStringError(ec, "cannot write " + what + " '" + path +
                                     "': " + ec.message());
  file.os() << text;
  file.keep();
  return Error::success();
}

/// `num / den` for the speed-up and gap columns. Times are >= 0; when both
/// are 0 (a profile with no compute and no bytes) the ratio is `bothZero`,
/// and a positive time over 0 has none (printed "-" and JSON null), so the
/// output never holds nan or inf.
std::optional<double> ratio(double num, double den, double bothZero) {
  if (den > 0)
    return num / den;
  if (num == 0)
    return bothZero;
  return std::nullopt;
}

json::Value orNull(std::optional<double> v) {
  return v ? json::Value(*v) : json::Value(nullptr);
}

struct Scored {
  Plan plan;
  Timeline timeline;
};

/// A plan of the steady-state model, its timeline and how long it took.
struct SteadyScored {
  SteadyPlan plan;
  SteadyTimeline timeline;
  double planMs = 0;
};

/// The steady-state model's collectives: the reduce-scatter and all-gather
/// of the --comm calibration where `oasr-bench comm` measured them (and no
/// --alpha/--beta replaced its allreduce), else halves of the allreduce.
/// `how` says which, for the report.
Expected<SteadyComm> steadyComm(const CommModel &twoTiers, std::string &how) {
  // Steady-state plans keep one tier, as the pipeline plans them.
  CommModel comm = twoTiers;
  comm.route = AllreduceRoute::Flat;
  if (steadyUpdateOpt != "lane" && steadyUpdateOpt != "shard")
    return createStringError(inconvertibleErrorCode(),
                             "--steady-update=" + steadyUpdateOpt +
                                 ": expected lane or shard");
  how = "reduce-scatter and all-gather: halves of the allreduce";
  SteadyComm sc = SteadyComm::fromAllreduce(comm);
  if (!commOpt.empty() && !alphaOpt.getNumOccurrences()) {
    bool measured[2] = {false, false};
    Expected<SteadyComm> c =
        SteadyComm::fromCalibrationFile(comm, commOpt, measured);
    if (!c)
      return c.takeError();
    sc = *c;
    if (measured[0] || measured[1])
      how = formatv("reduce-scatter {0}, all-gather {1} ({2})",
                    measured[0] ? "measured" : "half the allreduce",
                    measured[1] ? "measured" : "half the allreduce", commOpt)
                .str();
  }
  sc.shardUpdate = steadyUpdateOpt == "shard";
  how += sc.shardUpdate ? "; reduce-scatter groups update their shard "
                          "between the halves (--steady-update=shard)"
                        : "; reduce-scatter groups update on the compute "
                          "lane after the all-gather (as oasr-run runs them)";
  return sc;
}

/// Plans and scores the --steady strategies (under compression, `all` is
/// those that compress: oasr-barrier and oasr-step).
Expected<std::vector<SteadyScored>> scoreSteady(const Profile &profile,
                                                const SteadyComm &sc,
                                                const CompressPolicy &policy) {
  std::vector<std::string> names;
  if (steadyOpt.empty() || steadyOpt == "all") {
    for (const std::string &n : steadyStrategyNames())
      if (policy.off() || steadyStrategyCompresses(n))
        names.push_back(n);
  } else
    for (StringRef s : split(StringRef(steadyOpt), ','))
      names.push_back(s.trim().str());
  std::vector<SteadyScored> out;
  for (const std::string &name : names) {
    auto t0 = std::chrono::steady_clock::now();
    Expected<SteadyPlan> plan = makeSteadyPlan(name, profile, sc, policy);
    if (!plan)
      return createStringError(inconvertibleErrorCode(),
                               "--steady: " + toString(plan.takeError()));
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    SteadyTimeline t = simulateSteady(profile, sc, *plan);
    out.push_back({std::move(*plan), std::move(t), ms});
  }
  return out;
}
} // namespace

namespace {
/// What main scored, for the report in either format.
struct Scores {
  Profile profile;
  CommModel comm;
  CompressPolicy policy;
  std::vector<Scored> scored;
  std::vector<SteadyScored> steady;
  std::string steadyCollectives;
  double steadyBound = 0, oasrUs = 0, wfbpUs = 0;
  double bound = 0; ///< the lower bound (0 where groups compress)
  std::vector<ReadyGrad> ready;
  std::optional<double> speedup(const Timeline &t) const {
    return ratio(wfbpUs, t.iterationUs, 1.0);
  }
  std::optional<double> gap(const Timeline &t) const {
    return ratio(t.iterationUs - bound, bound, 0.0);
  }
};

/// Groups of `plan` sent as two-level allreduces.
unsigned countTwoLevel(const Scores &r, const Plan &plan) {
  return unsigned(llvm::count(twoLevelGroups(r.profile, r.comm, plan), true));
}

void printJson(raw_ostream &os, const Scores &r) {
  json::Array list;
  for (const Scored &s : r.scored) {
    json::Array groups;
    for (const GroupTiming &g : s.timeline.groups) {
      json::Array names;
      for (unsigned i = g.begin; i < g.end; ++i)
        names.push_back(r.ready[i].name);
      groups.push_back(std::move(names));
    }
    // What each group sends, where the plan compresses: "plain" or
    // "powersgd:R" (auto's ranks differ per group).
    json::Value forms = nullptr;
    if (s.plan.compresses()) {
      json::Array f;
      for (unsigned k = 0; k < s.plan.numGroups(); ++k)
        f.push_back(s.plan.form(k).name());
      forms = std::move(f);
    }
    // Each group's route, where the model has a usable second tier.
    json::Value routes = nullptr;
    if (r.comm.twoLevelUsable()) {
      json::Array a;
      for (bool two : twoLevelGroups(r.profile, r.comm, s.plan))
        a.push_back(two ? "two-level" : "flat");
      routes = std::move(a);
    }
    const Timeline &t = s.timeline;
    list.push_back(
        json::Object{{"name", s.plan.strategy},
                     {"iteration_us", t.iterationUs},
                     {"backward_end_us", t.backwardEndUs},
                     {"comm_end_us", t.commEndUs},
                     {"non_overlapped_comm_us", t.nonOverlappedCommUs},
                     {"overlap_ratio", t.overlapRatio},
                     {"speedup_over_wfbp", orNull(r.speedup(t))},
                     {"gap_to_lower_bound", orNull(r.gap(t))},
                     {"num_groups", int64_t(t.groups.size())},
                     {"compressed_groups", int64_t(s.plan.numCompressed())},
                     {"two_level_groups", int64_t(countTwoLevel(r, s.plan))},
                     {"groups", std::move(groups)},
                     {"forms", std::move(forms)},
                     {"routes", std::move(routes)}});
  }
  json::Object doc{
      {"model", r.profile.model},
      {"num_grads", int64_t(r.ready.size())},
      {"total_bytes", int64_t(r.profile.totalBytes())},
      {"compute_scale", double(computeScale)},
      {"comm", json::Object{{"alpha_s", r.comm.alphaS},
                            {"beta_s_per_byte", r.comm.betaSPerByte},
                            {"group_overhead_us", r.comm.groupOverheadUs},
                            {"pack_us_per_byte", r.comm.packUsPerByte},
                            {"overlap_rate", r.comm.overlapRate},
                            {"compute_rate", r.comm.computeRate},
                            {"call_compute_us", r.comm.callComputeUs},
                            {"grad_dtype", wireDTypeName(r.comm.wire)},
                            {"two_level",
                             r.comm.twoLevelUsable()
                                 ? json::Value(twoLevelJSON(r.comm.twoLevel))
                                 : nullptr}}},
      {"lower_bound_us", r.policy.off() ? json::Value(r.bound) : nullptr},
      {"compress", r.policy.name()},
      {"strategies", std::move(list)}};
  if (!r.steady.empty()) {
    json::Array plans;
    for (const SteadyScored &s : r.steady) {
      json::Array groups;
      for (const SteadyGroup &g : s.plan.groups)
        groups.push_back(
            json::Object{{"first_layer", r.profile.layers[g.firstLayer].name},
                         {"last_layer", r.profile.layers[g.lastLayer].name},
                         {"pieces", int64_t(g.pieces)},
                         {"collective", g.form == Collective::AllReduce
                                            ? "allreduce"
                                            : "reduce_scatter_all_gather"},
                         {"form", g.send.name()}});
      const SteadyTimeline &t = s.timeline;
      plans.push_back(json::Object{
          {"name", s.plan.strategy},
          {"period_us", t.periodUs},
          {"speedup_over_oasr", orNull(ratio(r.oasrUs, t.periodUs, 1.0))},
          {"gap_to_lower_bound",
           orNull(ratio(t.periodUs - r.steadyBound, r.steadyBound, 0.0))},
          {"wait_us", t.waitUs},
          {"comm_busy_us", t.commBusyUs},
          {"priority", s.plan.barrier ? "barrier"
                       : s.plan.priority == Priority::LayerIndex
                           ? "layer_index"
                           : "ready_order"},
          {"num_units", int64_t(s.plan.numUnits())},
          {"plan_ms", s.planMs},
          {"groups", std::move(groups)}});
    }
    doc["steady"] =
        json::Object{{"oasr_iteration_us", r.oasrUs},
                     {"lower_bound_us",
                      r.policy.off() ? json::Value(r.steadyBound) : nullptr},
                     {"collectives", r.steadyCollectives},
                     {"strategies", std::move(plans)}};
  }
  os << oasr::formatJSON(std::move(doc), 2) << "\n";
}

void printText(raw_ostream &os, const Scores &r) {
  os << formatv("model: {0}  layers: {1}  gradients: {2}  bytes: {3}\n",
                r.profile.model.empty() ? "?" : r.profile.model,
                r.profile.layers.size(), r.ready.size(),
                r.profile.totalBytes());
  os << formatv("forward: {0:f1} us  backward: {1:f1} us  update: {2:f1} us"
                "  compute scale: {3}\n",
                r.profile.forwardUs, r.profile.backwardUs(), r.profile.updateUs,
                double(computeScale));
  os << "comm: " << r.comm.describe() << "\n";
  if (r.policy.off())
    os << formatv("lower bound: {0:f1} us\n\n", r.bound);
  else
    os << "compress: " << r.policy.name()
       << " (speedup: over uncompressed wfbp; no lower bound: it carries "
          "every gradient byte)\n\n";
  const bool tiers = r.comm.twoLevelUsable();
  os << formatv("{0,-16} {1,7} {2,14} {3,8} {4,16} {5,8}{6}{7}\n", "strategy",
                "groups", "iteration_us", "speedup", "non_overlap_us", "gap",
                r.policy.off() ? "" : "  compressed",
                tiers ? "  two_level" : "");
  for (const Scored &s : r.scored) {
    const Timeline &t = s.timeline;
    std::optional<double> up = r.speedup(t), g = r.gap(t);
    os << formatv(
        "{0,-16} {1,7} {2,14:f1} {3,8} {4,16:f1} {5,8}{6}{7}\n",
        s.plan.strategy, t.groups.size(), t.iterationUs,
        up ? formatv("{0:f3}x", *up).str() : "-", t.nonOverlappedCommUs,
        g && r.policy.off() ? formatv("{0:f1}%", 100 * *g).str() : "-",
        r.policy.off() ? std::string()
                       : formatv("  {0,10}", s.plan.numCompressed()).str(),
        tiers ? formatv("  {0,9}", countTwoLevel(r, s.plan)).str()
              : std::string());
  }
  if (!r.steady.empty()) {
    os << formatv("\nsteady state (the next forward waits per layer): "
                  "{0}; {1}\n\n",
                  r.policy.off()
                      ? formatv("lower bound {0:f1} us", r.steadyBound).str()
                      : "compress " + r.policy.name() +
                            ", vs_oasr against oasr's compressed plan, no "
                            "lower bound",
                  r.steadyCollectives);
    os << formatv("{0,-22} {1,7} {2,7} {3,13} {4,8} {5,8} {6,9}  {7}\n",
                  "strategy", "groups", "units", "period_us", "vs_oasr", "gap",
                  "plan_ms", "plan");
    for (const SteadyScored &s : r.steady) {
      const SteadyTimeline &t = s.timeline;
      std::optional<double> up = ratio(r.oasrUs, t.periodUs, 1.0);
      std::optional<double> g =
          ratio(t.periodUs - r.steadyBound, r.steadyBound, 0.0);
      os << formatv("{0,-22} {1,7} {2,7} {3,13:f1} {4,8} {5,8} {6,9:f1}  "
                    "{7}\n",
                    s.plan.strategy, s.plan.groups.size(), s.plan.numUnits(),
                    t.periodUs, up ? formatv("{0:f3}x", *up).str() : "-",
                    g ? formatv("{0:f1}%", 100 * *g).str() : "-", s.planMs,
                    s.plan.describe());
    }
  }
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(planCat);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "oasr-plan (oasr " << OASR_VERSION << ", LLVM " << LLVM_VERSION_STRING
       << ")\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "oasr-plan: choose which layers' gradients share one allreduce\n\n"
      "Scores each strategy with the timeline model of DESIGN.md and prints "
      "the predicted iteration time, the speed-up over wfbp, the "
      "non-overlapped communication and the gap to a lower bound.\n");

  if (!(computeScale > 0))
    return fail("--compute-scale must be > 0");
  Expected<std::vector<std::string>> strategies = chooseStrategies();
  if (!strategies)
    return fail(toString(strategies.takeError()));
  Expected<Profile> loaded = readProfile(profilePath);
  if (!loaded)
    return fail(toString(loaded.takeError()));
  Profile profile = scaleCompute(std::move(*loaded), computeScale);
  Expected<CommModel> comm = chooseComm(profile);
  if (!comm)
    return fail(toString(comm.takeError()));

  Expected<CompressPolicy> policy = parseCompressPolicy(compressOpt);
  if (!policy)
    return fail("--compress=" + toString(policy.takeError()));
  if (compressGmacsOpt.getNumOccurrences() && !(compressGmacsOpt > 0))
    return fail("--compress-gmacs must be > 0");
  if (!policy->off() && comm->wire == WireDType::F16)
    return fail("--compress=" + compressOpt +
                ": PowerSGD's factors are not scaled, and P = M Q can pass "
                "f16's range; send them in bf16 (--grad-dtype=bf16) or f32");
  if (!policy->off())
    setCompressionCosts(*comm, compressGmacsOpt);
  Expected<AllreduceRoute> route = parseAllreduceRoute(twoLevelOpt);
  if (!route)
    return fail("--two-level=" + toString(route.takeError()));
  if (twoLevelOpt.getNumOccurrences() && *route != AllreduceRoute::Flat &&
      !comm->twoLevel.present())
    return fail("--two-level=" + twoLevelOpt +
                ": the communication model has no second tier (a "
                "calibration's 'two_level', which `oasr-bench comm` writes "
                "where ranks share nodes)");
  comm->route = *route;
  Scores r;
  r.profile = std::move(profile);
  r.comm = *comm;
  r.policy = *policy;
  for (const std::string &s : *strategies) {
    Expected<Plan> plan = makeCompressedPlan(s, r.profile, r.comm, r.policy);
    if (!plan)
      return fail(toString(plan.takeError()));
    Timeline t = simulate(r.profile, r.comm, *plan);
    r.scored.push_back({std::move(*plan), std::move(t)});
  }
  if (steadyOpt.getNumOccurrences()) {
    Expected<SteadyComm> sc = steadyComm(r.comm, r.steadyCollectives);
    if (!sc)
      return fail(toString(sc.takeError()));
    auto scoredSteady = scoreSteady(r.profile, *sc, r.policy);
    if (!scoredSteady)
      return fail(toString(scoredSteady.takeError()));
    r.steady = std::move(*scoredSteady);
    // Against oasr's plan in the same policy; the bound carries every
    // gradient byte, so none where groups compress.
    r.steadyBound = r.policy.off() ? steadyLowerBoundUs(r.profile, *sc) : 0;
    r.oasrUs =
        simulate(r.profile, r.comm,
                 *makeCompressedPlan("oasr", r.profile, r.comm, r.policy))
            .iterationUs;
  }
  Plan wfbp = *makePlan("wfbp", r.profile, r.comm);
  r.wfbpUs = simulate(r.profile, r.comm, wfbp).iterationUs;
  // The bound carries every gradient byte: none where groups compress.
  r.bound = r.policy.off() ? lowerBoundUs(r.profile, r.comm) : 0;
  r.ready = readyOrder(r.profile);
  if (formatOpt == OutputFormat::JSON)
    printJson(outs(), r);
  else
    printText(outs(), r);

  std::vector<Timeline> timelines;
  for (const Scored &s : r.scored)
    timelines.push_back(s.timeline);
  if (!traceOpt.empty()) {
    std::string text;
    raw_string_ostream ts(text);
    ts << oasr::formatJSON(chromeTrace(r.profile, timelines)) << "\n";
    if (Error e = writeFile(traceOpt, "trace", text))
      return fail(toString(std::move(e)));
  }
  if (!svgOpt.empty())
    if (Error e = writeFile(svgOpt, "SVG", ganttSVG(r.profile, timelines)))
      return fail(toString(std::move(e)));
  return 0;
}
