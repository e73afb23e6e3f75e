//===- PlannerBench.cpp - Planner speed at 10^2 .. 10^5 tensors -----------===//
//
// Synthetic CNN-like profiles (a weight and a bias per layer, log-uniform
// sizes, random backward times, 8-worker 56 Gb IB alpha/beta of DESIGN.md).
// Measures each strategy's planning time, the O(n^2) reference DP and the
// simulator. Run through bench/run_planner.sh.
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/Schedule.h"

#include "benchmark/benchmark.h"

#include <cmath>
#include <random>

using namespace oasr::schedule;

namespace {

/// A profile with `tensors` gradients: layers of a weight and a bias.
Profile syntheticProfile(unsigned tensors) {
  std::mt19937_64 rng(tensors);
  std::uniform_real_distribution<double> time(20, 2000), logSize(2, 7);
  Profile p;
  p.model = "synthetic";
  p.forwardUs = 1000;
  for (unsigned i = 0; p.numGrads() < tensors; ++i) {
    Layer l;
    l.name = "layer" + std::to_string(i);
    l.backwardUs = time(rng);
    l.grads.push_back(
        {l.name + ".weight", 4 * uint64_t(std::pow(10.0, logSize(rng)))});
    if (p.numGrads() + 1 < tensors)
      l.grads.push_back({l.name + ".bias", 4 * 256});
    p.layers.push_back(std::move(l));
  }
  return p;
}

const CommModel kIB8 = CommModel::alphaBeta(9.75e-5, 3.06e-10, 8);

void runStrategy(benchmark::State &state, const char *strategy) {
  Profile p = syntheticProfile(state.range(0));
  for (auto _ : state) {
    llvm::Expected<Plan> plan = makePlan(strategy, p, kIB8);
    benchmark::DoNotOptimize(plan->groupEnds.data());
  }
  state.SetComplexityN(state.range(0));
  state.counters["tensors"] = state.range(0);
}

void BM_Optimal(benchmark::State &s) { runStrategy(s, "optimal"); }
void BM_Oasr(benchmark::State &s) { runStrategy(s, "oasr"); }
void BM_Mgwfbp(benchmark::State &s) { runStrategy(s, "mgwfbp"); }
void BM_Ddp(benchmark::State &s) { runStrategy(s, "ddp"); }

/// The pruned DP with extras (packing copies make the affine region start
/// at j - 2, exercising every candidate class).
void BM_OasrWithExtras(benchmark::State &state) {
  Profile p = syntheticProfile(state.range(0));
  CommModel m = kIB8;
  m.groupOverheadUs = 20;
  m.packUsPerByte = 1e-5;
  for (auto _ : state)
    benchmark::DoNotOptimize(oasrPlan(p, m).groupEnds.data());
  state.SetComplexityN(state.range(0));
}

/// The pruned DP with an overlap rate below 1 (ready times in channel
/// capacity coordinates).
void BM_OasrOverlapRate(benchmark::State &state) {
  Profile p = syntheticProfile(state.range(0));
  CommModel m = kIB8;
  m.overlapRate = 0.3;
  for (auto _ : state)
    benchmark::DoNotOptimize(oasrPlan(p, m).groupEnds.data());
  state.SetComplexityN(state.range(0));
}

/// The plain O(n^2) recurrence, for comparison.
void BM_OptimalQuadratic(benchmark::State &state) {
  Profile p = syntheticProfile(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(optimalPlanQuadratic(p, kIB8).groupEnds.data());
  state.SetComplexityN(state.range(0));
}

/// Scoring one plan.
void BM_Simulate(benchmark::State &state) {
  Profile p = syntheticProfile(state.range(0));
  Plan plan = optimalPlan(p, kIB8);
  for (auto _ : state)
    benchmark::DoNotOptimize(simulate(p, kIB8, plan).iterationUs);
  state.SetComplexityN(state.range(0));
}

#define SIZES ->Arg(100)->Arg(600)->Arg(1000)->Arg(10000)->Arg(100000)
BENCHMARK(BM_Optimal) SIZES->Unit(benchmark::kMicrosecond)->Complexity();
BENCHMARK(BM_Oasr) SIZES->Unit(benchmark::kMicrosecond)->Complexity();
BENCHMARK(BM_OasrWithExtras) SIZES->Unit(benchmark::kMicrosecond)->Complexity();
BENCHMARK(BM_OasrOverlapRate)
SIZES->Unit(benchmark::kMicrosecond)->Complexity();
BENCHMARK(BM_Mgwfbp) SIZES->Unit(benchmark::kMicrosecond)->Complexity();
BENCHMARK(BM_Ddp) SIZES->Unit(benchmark::kMicrosecond)->Complexity();
BENCHMARK(BM_Simulate) SIZES->Unit(benchmark::kMicrosecond)->Complexity();
BENCHMARK(BM_OptimalQuadratic)
    ->Arg(100)
    ->Arg(600)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity();

} // namespace

BENCHMARK_MAIN();
