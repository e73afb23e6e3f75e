//===- OpsBench.cpp - The cpu backend's newer ops, timed
//-------------------===//
//
// Times one forward kernel per op on a representative shape (the op list of
// bench/kernels/ops_torch.py, which times PyTorch's op on the same shape)
// and prints one line per case:   name  ms  elements
//
// Usage: oasr-bench-ops [--threads T] [--min-time S] [--clock wall|cpu]
//
//===----------------------------------------------------------------------===//

#include "BenchClock.h"
#include "oasr/Runtime/Kernel.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

using namespace oasr::rt;
using oasr::bench::gCpuClock;
using oasr::bench::timeIt;

namespace {

/// One case: an op, its operands (index operands get values in
/// [0, indexRange) and are handed over as constants when small) and
/// attributes.
struct Case {
  std::string name, op;
  std::vector<TensorDesc> ins, outs;
  std::function<void(AttrMap &)> attrs = [](AttrMap &) {};
  int64_t indexRange = 0;
  std::vector<std::vector<char>> values; // per operand, constants
};

TensorDesc f32(std::vector<int64_t> s) { return {DType::F32, std::move(s)}; }
TensorDesc i64(std::vector<int64_t> s) { return {DType::I64, std::move(s)}; }

std::vector<char> bytesOf(std::vector<int64_t> v) {
  std::vector<char> b(v.size() * 8);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<Case> cases() {
  const std::vector<int64_t> act = {8, 64, 56, 56}, emb = {8, 256, 512};
  std::vector<Case> cs;
  for (const char *op : {"Sin", "Cos"})
    cs.push_back({std::string(op), op, {f32(emb)}, {f32(emb)}});
  for (const char *op : {"Softplus", "Softsign", "Selu", "Celu", "Floor"})
    cs.push_back({op, op, {f32(act)}, {f32(act)}});
  cs.push_back({"PRelu", "PRelu", {f32(act), f32({64, 1, 1})}, {f32(act)}});
  cs.push_back({"Max", "Max", {f32(act), f32(act)}, {f32(act)}});
  Case mod{"Mod_fmod", "Mod", {f32(act), f32({})}, {f32(act)}};
  mod.attrs = [](AttrMap &a) { a.set("fmod", int64_t(1)); };
  cs.push_back(mod);
  for (const char *op : {"ReduceMax", "ReduceProd"}) {
    Case r{op, op, {f32({64, 1024, 64})}, {f32({64, 1024, 1})}};
    r.attrs = [](AttrMap &a) { a.set("axes", std::vector<int64_t>{-1}); };
    cs.push_back(r);
  }
  Case cum{"CumSum",
           "CumSum",
           {f32({8, 1024, 256}), i64({})},
           {f32({8, 1024, 256})}};
  cum.values = {{}, bytesOf({1})};
  cs.push_back(cum);
  Case am{"ArgMax", "ArgMax", {f32({256, 32000})}, {i64({256, 1})}};
  am.attrs = [](AttrMap &a) { a.set("axis", int64_t(-1)); };
  cs.push_back(am);
  Case tk{"TopK_k5",
          "TopK",
          {f32({256, 32000}), i64({1})},
          {f32({256, 5}), i64({256, 5})}};
  tk.values = {{}, bytesOf({5})};
  cs.push_back(tk);
  Case ge{"GatherElements",
          "GatherElements",
          {f32({8, 1024, 64}), i64({8, 512, 64})},
          {f32({8, 512, 64})}};
  ge.attrs = [](AttrMap &a) { a.set("axis", int64_t(1)); };
  ge.indexRange = 1024;
  cs.push_back(ge);
  Case se{"ScatterElements_add",
          "ScatterElements",
          {f32({8, 1024, 64}), i64({8, 512, 64}), f32({8, 512, 64})},
          {f32({8, 1024, 64})}};
  se.attrs = [](AttrMap &a) {
    a.set("axis", int64_t(1));
    a.set("reduction", std::string("add"));
  };
  se.indexRange = 1024;
  cs.push_back(se);
  Case gn{"GatherND_batch",
          "GatherND",
          {f32({8, 1024, 64}), i64({8, 256, 1})},
          {f32({8, 256, 64})}};
  gn.attrs = [](AttrMap &a) { a.set("batch_dims", int64_t(1)); };
  gn.indexRange = 1024;
  cs.push_back(gn);
  Case oh{"OneHot",
          "OneHot",
          {i64({4096}), i64({}), f32({2})},
          {f32({4096, 1000})}};
  oh.values = {{}, bytesOf({1000}), {}};
  oh.indexRange = 1000;
  cs.push_back(oh);
  return cs;
}

} // namespace

int main(int argc, char **argv) {
  int threads = 0;
  double minTime = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--min-time")
      minTime = std::atof(argv[i + 1]);
    else if (a == "--clock")
      gCpuClock = std::string(argv[i + 1]) == "cpu";
  }
  auto backend = createCpuBackend();
  if (threads)
    backend->setNumThreads(threads);
  std::printf("# oasr cpu backend, threads %d, %s time\n", threads,
              gCpuClock ? "cpu" : "wall");
  std::printf("%-20s %10s %12s\n", "op", "ms", "elements");
  for (Case &c : cases()) {
    OpSpec spec;
    spec.opType = c.op;
    spec.name = c.name;
    c.attrs(spec.attrs);
    spec.inputs = c.ins;
    spec.outputs = c.outs;
    spec.inputValues = c.values;
    spec.inputValues.resize(c.ins.size());
    std::string err;
    auto k = backend->create(spec, err);
    if (!k) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), err.c_str());
      return 1;
    }
    std::vector<TensorRef> in, out;
    for (size_t j = 0; j < c.ins.size(); ++j) {
      TensorRef r;
      r.desc = c.ins[j];
      r.data = backend->allocate(std::max<size_t>(r.desc.bytes(), 8));
      if (r.desc.dtype == DType::I64) {
        auto *p = r.as<int64_t>();
        if (j < c.values.size() && !c.values[j].empty())
          std::memcpy(p, c.values[j].data(), c.values[j].size());
        else
          for (int64_t e = 0; e < r.desc.numel(); ++e)
            p[e] = c.indexRange ? int64_t((e * 2654435761u) % c.indexRange) : 0;
      } else {
        auto *p = r.as<float>();
        for (int64_t e = 0; e < r.desc.numel(); ++e)
          p[e] = float((e * 2654435761u) % 1000) / 250.0f - 2.0f;
        if (c.op == "Mod" && j == 1)
          p[0] = 0.7f;
        if (c.op == "OneHot")
          p[0] = 0.0f, p[1] = 1.0f;
      }
      in.push_back(r);
    }
    for (const TensorDesc &d : c.outs) {
      TensorRef r;
      r.desc = d;
      r.data = backend->allocate(d.bytes());
      out.push_back(r);
    }
    double t = timeIt([&] { k->run(in, out); }, minTime);
    std::printf("%-20s %10.3f %12lld\n", c.name.c_str(), t * 1e3,
                (long long)c.outs[0].numel());
    for (TensorRef &r : in)
      backend->deallocate(r.data);
    for (TensorRef &r : out)
      backend->deallocate(r.data);
  }
  return 0;
}
