//===- KernelTests.cpp - kernels of every backend against PyTorch ---------===//
//
// Every forward and backward kernel of the cpu backend, and of the cuda
// backend in a CUDA build, is compared with PyTorch: the same cases on each.
// scripts/kernel_reference.py writes random inputs and torch's results
// (float64 math on the float32 inputs) into a temp directory at test time,
// one group of cases per test. A result passes when its largest error is
// within 1e-4 of the reference's largest magnitude; integer results (MaxPool
// indices) must match exactly. The cuda cases need a visible GPU and report
// the CUDA runtime's reason when there is none; an op without a cuda kernel
// (marked CPU-only in the registry, which OASROpsTests checks) is listed and
// passed over. OASR_PYTHON and OASR_SOURCE_DIR in the environment override
// the build's, so the binary runs on a GPU machine with another layout.
// Dropout, which torch cannot reproduce bit for bit, is checked for its
// statistics and for consistency between its forward and backward kernels;
// malformed nodes must be refused with errors that name them.
//
// The same groups run again in bf16 ("cpu:bf16"): the script draws inputs
// representable in bf16 and declares the tensors a mixed-precision step
// gives the node as bf16 (the normalisations' scale, bias and statistics
// stay f32); a bf16 result passes within 8e-3 of the reference's largest
// magnitude (two bf16 rounding steps at that magnitude), an f32 one within
// 1e-4 as before. Every op runs: natively where the backend has a bf16
// kernel, widened to its f32 kernel where not.
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Runtime/Kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace oasr::rt;

namespace {

constexpr double kTolerance = 1e-4;
constexpr double kBF16Tolerance = 8e-3;

struct RefTensor {
  TensorDesc desc;
  std::string file; // "-" when not compared
  bool used = true;
};

struct RefCase {
  std::string name, op;
  AttrMap attrs;
  uint64_t seed = 0;
  std::vector<RefTensor> ins, outs;
};

DType parseDType(const std::string &s) {
  if (s == "f32")
    return DType::F32;
  if (s == "i64")
    return DType::I64;
  if (s == "i1")
    return DType::Bool;
  if (s == "bf16")
    return DType::BF16;
  ADD_FAILURE() << "unknown dtype " << s;
  return DType::F32;
}

RefTensor parseTensor(std::istringstream &is) {
  RefTensor t;
  std::string dtype;
  size_t rank = 0;
  is >> dtype >> t.file >> rank;
  t.desc.dtype = parseDType(dtype);
  t.desc.shape.resize(rank);
  for (auto &d : t.desc.shape)
    is >> d;
  std::string flag;
  if (is >> flag)
    t.used = flag != "unused";
  return t;
}

std::vector<RefCase> parseManifest(const std::string &path) {
  std::vector<RefCase> cases;
  std::ifstream f(path);
  std::string line;
  RefCase cur;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string kw;
    is >> kw;
    if (kw == "case") {
      cur = RefCase();
      is >> cur.name >> cur.op;
    } else if (kw == "attr") {
      std::string name, kind;
      is >> name >> kind;
      if (kind == "int") {
        int64_t v;
        is >> v;
        cur.attrs.set(name, v);
      } else if (kind == "float") {
        double v;
        is >> v;
        cur.attrs.set(name, v);
      } else if (kind == "str") {
        std::string v;
        is >> v;
        cur.attrs.set(name, v);
      } else if (kind == "ints") {
        size_t n;
        is >> n;
        std::vector<int64_t> v(n);
        for (auto &x : v)
          is >> x;
        cur.attrs.set(name, v);
      } else if (kind == "floats") {
        size_t n;
        is >> n;
        std::vector<double> v(n);
        for (auto &x : v)
          is >> x;
        cur.attrs.set(name, v);
      }
    } else if (kw == "seed") {
      is >> cur.seed;
    } else if (kw == "in") {
      cur.ins.push_back(parseTensor(is));
    } else if (kw == "out") {
      cur.outs.push_back(parseTensor(is));
    } else if (kw == "end") {
      cases.push_back(cur);
    }
  }
  return cases;
}

std::vector<char> readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

/// A buffer from the backend's allocator.
struct Buffer {
  KernelBackend *backend = nullptr;
  void *data = nullptr;
  size_t bytes = 0;
  Buffer(KernelBackend &b, size_t n) : backend(&b), bytes(n) {
    data = b.allocate(n);
  }
  Buffer(Buffer &&o) noexcept
      : backend(o.backend), data(o.data), bytes(o.bytes) {
    o.data = nullptr;
  }
  Buffer(const Buffer &) = delete;
  ~Buffer() {
    if (data)
      backend->deallocate(data);
  }
};

/// `name` from the environment, else the build's `fallback`.
std::string fromEnv(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v && *v ? v : fallback;
}

/// The backend a test parameter names, made once per process: null with
/// `why` set when it cannot run here (a CUDA build without a visible GPU).
KernelBackend *sharedBackend(const std::string &name, std::string &why) {
  static std::map<std::string, std::unique_ptr<KernelBackend>> made;
  static std::map<std::string, std::string> reasons;
  if (!made.count(name)) {
    std::unique_ptr<KernelBackend> b;
    std::string error;
    if (name == "cpu") {
      b = createCpuBackend();
      b->setNumThreads(2);
    }
#if OASR_ENABLE_CUDA
    else if (name == "cuda")
      b = createCudaBackend(error);
#endif
    reasons[name] = error;
    made[name] = std::move(b);
  }
  why = reasons[name];
  return made[name].get();
}

/// The op types `backend` has kernels for.
const std::set<std::string> &kernelOps(const std::string &backend) {
  static std::map<std::string, std::set<std::string>> ops;
  if (!ops.count(backend)) {
    std::vector<std::string> list = cpuKernelOps();
#if OASR_ENABLE_CUDA
    if (backend == "cuda")
      list = cudaKernelOps();
#endif
    ops[backend] = std::set<std::string>(list.begin(), list.end());
  }
  return ops[backend];
}

/// A test parameter: "BACKEND" or "BACKEND:PRECISION".
class KernelsVsTorch : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    std::string param = GetParam();
    size_t colon = param.find(':');
    backendName = param.substr(0, colon);
    precision = colon == std::string::npos ? "f32" : param.substr(colon + 1);
    std::string why;
    backend = sharedBackend(backendName, why);
    if (!backend)
      GTEST_SKIP() << "no " << backendName << " backend here: " << why;
  }

  /// Generates group `group` with PyTorch and checks every case in it.
  void checkGroup(const std::string &group) {
    std::string dir = ::testing::TempDir() + "oasr-kernels-" + group + "-" +
                      backendName + "-" + precision + "-" +
                      std::to_string(::getpid());
    std::string cmd = fromEnv("OASR_PYTHON", OASR_PYTHON) + " " +
                      fromEnv("OASR_SOURCE_DIR", OASR_SOURCE_DIR) +
                      "/scripts/kernel_reference.py --out " + dir +
                      " --group " + group + " --precision " + precision;
    int rc = std::system(cmd.c_str());
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
      GTEST_SKIP() << "PyTorch is not available to " << OASR_PYTHON;
    }
    ASSERT_EQ(rc, 0) << "reference generation failed: " << cmd;
    std::vector<RefCase> cases = parseManifest(dir + "/manifest.txt");
    ASSERT_FALSE(cases.empty());
    for (const RefCase &c : cases) {
      if (kernelOps(backendName).count(c.op))
        runCase(c, dir);
      else
        expectRefused(c);
    }
    std::system(("rm -rf " + dir).c_str());
  }

  /// An op without a kernel on this backend (CPU-only, kCpuOnly in
  /// lib/Ops/OpRegistry.cpp) is refused at plan time with the error that
  /// names the node and the backend.
  void expectRefused(const RefCase &c) {
    OpSpec spec;
    spec.opType = c.op;
    spec.name = "/test/" + c.name;
    for (const auto &t : c.ins)
      spec.inputs.push_back(t.desc);
    for (const auto &t : c.outs)
      spec.outputs.push_back(t.desc);
    std::string error;
    EXPECT_FALSE(backend->create(spec, error)) << c.name;
    EXPECT_NE(error.find("'" + spec.name + "'"), std::string::npos) << error;
    EXPECT_NE(error.find("not supported by the " + backendName + " backend"),
              std::string::npos)
        << error;
    std::printf("  %-28s %s: no %s kernel (CPU-only), refused\n",
                c.name.c_str(), c.op.c_str(), backendName.c_str());
  }

  void runCase(const RefCase &c, const std::string &dir) {
    SCOPED_TRACE("case " + c.name + " (" + c.op + ") on " + GetParam());
    OpSpec spec;
    spec.opType = c.op;
    spec.name = "/test/" + c.name;
    spec.attrs = c.attrs;
    spec.seed = c.seed;
    for (const auto &t : c.ins) {
      spec.inputs.push_back(t.file == "-" ? TensorDesc{} : t.desc);
      // Small integer operands (axes, k, shapes) reach the kernel as the
      // executor hands a program's constants over (OpSpec::inputValues).
      const bool small =
          t.file != "-" && t.desc.numel() <= 8 &&
          (t.desc.dtype == DType::I64 || t.desc.dtype == DType::I32);
      spec.inputValues.push_back(small ? readFile(dir + "/" + t.file)
                                       : std::vector<char>{});
    }
    for (const auto &t : c.outs) {
      spec.outputs.push_back(t.desc);
      spec.outputUsed.push_back(t.used);
    }
    std::string error;
    std::unique_ptr<Kernel> k = backend->create(spec, error);
    ASSERT_TRUE(k) << error;

    std::vector<Buffer> inBufs, outBufs;
    std::vector<TensorRef> ins, outs;
    for (const auto &t : c.ins) {
      if (t.file == "-") { // an absent operand, as the executor passes it
        ins.push_back({nullptr, TensorDesc{}});
        continue;
      }
      std::vector<char> bytes = readFile(dir + "/" + t.file);
      ASSERT_EQ(bytes.size(), t.desc.bytes()) << t.file;
      inBufs.emplace_back(*backend, bytes.size());
      backend->copyToDevice(inBufs.back().data, bytes.data(), bytes.size());
      ins.push_back({inBufs.back().data, t.desc});
    }
    for (const auto &t : c.outs) {
      outBufs.emplace_back(*backend, t.desc.bytes());
      outs.push_back({outBufs.back().data, t.desc});
    }
    // Run twice on garbage-filled results: kernels are built once and run
    // every step, and must write every element they own.
    for (int rep = 0; rep < 2; ++rep) {
      for (auto &b : outBufs) {
        std::vector<char> poison(b.bytes, char(0xff));
        backend->copyToDevice(b.data, poison.data(), b.bytes);
      }
      k->run(ins, outs);
    }
    backend->synchronize();
    for (size_t i = 0; i < c.outs.size(); ++i) {
      const RefTensor &t = c.outs[i];
      if (t.file == "-")
        continue;
      std::vector<char> ref = readFile(dir + "/" + t.file);
      // A bf16 result's reference is f32 (the float64 one, rounded once).
      size_t refBytes = t.desc.dtype == DType::BF16 ? size_t(t.desc.numel()) * 4
                                                    : t.desc.bytes();
      ASSERT_EQ(ref.size(), refBytes) << t.file;
      std::vector<char> got(t.desc.bytes());
      backend->copyToHost(got.data(), outBufs[i].data, got.size());
      compare(c.name + ".out" + std::to_string(i), t.desc, got.data(),
              ref.data());
    }
  }

  static void compare(const std::string &what, const TensorDesc &d,
                      const void *got, const void *ref) {
    if (d.dtype != DType::F32 && d.dtype != DType::BF16) {
      EXPECT_EQ(std::memcmp(got, ref, d.bytes()), 0)
          << what << ": integer result differs";
      return;
    }
    std::vector<float> widened;
    if (d.dtype == DType::BF16) {
      const uint16_t *h = static_cast<const uint16_t *>(got);
      for (int64_t i = 0; i < d.numel(); ++i) {
        uint32_t u = uint32_t(h[i]) << 16;
        float f;
        std::memcpy(&f, &u, sizeof f);
        widened.push_back(f);
      }
      got = widened.data();
    }
    const double tolerance =
        d.dtype == DType::BF16 ? kBF16Tolerance : kTolerance;
    const float *g = static_cast<const float *>(got);
    const float *r = static_cast<const float *>(ref);
    double maxRef = 0, maxErr = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < d.numel(); ++i) {
      if (std::isnan(r[i]) && std::isnan(g[i]))
        continue; // NaN where torch has NaN (Max, Min keep it)
      maxRef = std::max(maxRef, std::fabs(double(r[i])));
      double e = std::fabs(double(g[i]) - double(r[i]));
      if (!(e <= maxErr)) { // NaN counts as the worst
        maxErr = std::isnan(e) ? INFINITY : e;
        worst = i;
      }
    }
    double scale = std::max(maxRef, 1e-6);
    std::printf("  %-28s max|ref| %-10.4g rel.err %.2e%s\n", what.c_str(),
                maxRef, maxErr / scale,
                d.dtype == DType::BF16 ? " (bf16)" : "");
    EXPECT_LE(maxErr, tolerance * scale)
        << what << ": element " << worst << " is " << g[worst]
        << ", torch says " << r[worst] << " (max |ref| " << maxRef << ")";
  }

  KernelBackend *backend = nullptr;
  std::string backendName, precision;
};

/// The optimizer updates (KernelBackend::update) against torch.optim on
/// the same gradients: 20 steps of each case of scripts/
/// optimizer_reference.py, the parameter within 1e-6 of its largest
/// magnitude (float32 arithmetic in both; the rules' order of operations
/// is PyTorch's).
TEST_P(KernelsVsTorch, Optimizers) {
  // (Updates run on f32 masters at every precision: the bf16 instance
  // checks the same.)
  std::string dir = ::testing::TempDir() + "oasr-optimizers-" + backendName +
                    "-" + precision + "-" + std::to_string(::getpid());
  std::string cmd = fromEnv("OASR_PYTHON", OASR_PYTHON) + " " +
                    fromEnv("OASR_SOURCE_DIR", OASR_SOURCE_DIR) +
                    "/scripts/optimizer_reference.py --out " + dir;
  int rc = std::system(cmd.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
    GTEST_SKIP() << "PyTorch is not available to " << OASR_PYTHON;
  ASSERT_EQ(rc, 0) << "reference generation failed: " << cmd;
  std::ifstream manifest(dir + "/manifest.txt");
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    std::istringstream is(line);
    std::string kw, name;
    UpdateRule rule;
    int steps = 0, nesterov = 0;
    size_t n = 0;
    is >> kw >> name >> rule.algo >> steps >> n >> rule.lr >> rule.momentum >>
        rule.weightDecay >> nesterov >> rule.beta1 >> rule.beta2 >>
        rule.epsilon;
    rule.nesterov = nesterov != 0;
    ASSERT_FALSE(is.fail()) << "malformed line: " << line;
    const size_t bytes = n * sizeof(float);
    const int states = rule.algo == "adamw" ? 2 : rule.algo == "momentum";
    Buffer p(*backend, bytes), g(*backend, bytes);
    std::vector<Buffer> state;
    std::vector<float> zeros(n, 0.0f);
    for (int k = 0; k < states; ++k) {
      state.emplace_back(*backend, bytes);
      backend->copyToDevice(state.back().data, zeros.data(), bytes);
    }
    std::vector<char> p0 = readFile(dir + "/" + name + ".p0");
    ASSERT_EQ(p0.size(), bytes);
    backend->copyToDevice(p.data, p0.data(), bytes);
    auto ref = [&](Buffer &b) {
      return TensorRef{b.data, TensorDesc{DType::F32, {int64_t(n)}}};
    };
    for (int t = 0; t < steps; ++t) {
      std::vector<char> gt =
          readFile(dir + "/" + name + ".g" + std::to_string(t));
      ASSERT_EQ(gt.size(), bytes);
      backend->copyToDevice(g.data, gt.data(), bytes);
      std::vector<TensorRef> in{ref(p), ref(g)}, out{ref(p)};
      for (Buffer &b : state) {
        in.push_back(ref(b));
        out.push_back(ref(b));
      }
      backend->update(rule, t, in, out);
    }
    backend->synchronize();
    std::vector<float> got(n), want(n);
    backend->copyToHost(got.data(), p.data, bytes);
    std::vector<char> w =
        readFile(dir + "/" + name + ".p" + std::to_string(steps));
    ASSERT_EQ(w.size(), bytes);
    std::memcpy(want.data(), w.data(), bytes);
    double maxRef = 0, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; ++i)
      maxRef = std::max(maxRef, std::fabs(double(want[i])));
    for (size_t i = 0; i < n; ++i) {
      double e = std::fabs(double(got[i]) - double(want[i]));
      if (e > worst) {
        worst = e;
        at = i;
      }
    }
    EXPECT_LE(worst, 1e-6 * maxRef)
        << name << " (" << rule.algo << ") after " << steps << " steps: "
        << "element " << at << " is " << got[at] << ", torch.optim says "
        << want[at];
    ++cases;
  }
  EXPECT_EQ(cases, 4);
  std::system(("rm -rf " + dir).c_str());
}

TEST_P(KernelsVsTorch, Conv) { checkGroup("conv"); }
TEST_P(KernelsVsTorch, BatchNorm) { checkGroup("bn"); }
TEST_P(KernelsVsTorch, Eltwise) { checkGroup("eltwise"); }
TEST_P(KernelsVsTorch, Pool) { checkGroup("pool"); }
TEST_P(KernelsVsTorch, Gemm) { checkGroup("gemm"); }
TEST_P(KernelsVsTorch, MatMulTranspose) { checkGroup("matmul"); }
TEST_P(KernelsVsTorch, LossSoftmax) { checkGroup("loss"); }
TEST_P(KernelsVsTorch, ShapeOps) { checkGroup("shape"); }
TEST_P(KernelsVsTorch, BroadcastArith) { checkGroup("arith"); }
TEST_P(KernelsVsTorch, TransformerOps) { checkGroup("transformer"); }
TEST_P(KernelsVsTorch, PointwiseOps) { checkGroup("pointwise"); }
TEST_P(KernelsVsTorch, ConvTranspose) { checkGroup("convtranspose"); }
TEST_P(KernelsVsTorch, Resize) { checkGroup("resize"); }
TEST_P(KernelsVsTorch, Recurrent) { checkGroup("recurrent"); }
TEST_P(KernelsVsTorch, Attention) { checkGroup("attention"); }

INSTANTIATE_TEST_SUITE_P(Backends, KernelsVsTorch,
                         ::testing::Values(std::string("cpu")
#if OASR_ENABLE_CUDA
                                               ,
                                           std::string("cuda")
#endif
                                               ),
                         [](const auto &info) { return info.param; });
// bf16 on each backend.
INSTANTIATE_TEST_SUITE_P(MixedPrecision, KernelsVsTorch,
                         ::testing::Values(std::string("cpu:bf16")
#if OASR_ENABLE_CUDA
                                               ,
                                           std::string("cuda:bf16")
#endif
                                               ),
                         [](const auto &info) {
                           std::string name = info.param;
                           name[name.find(':')] = '_';
                           return name;
                         });

//===----------------------------------------------------------------------===//
// Dropout: statistics, reproducibility, forward/backward consistency
//===----------------------------------------------------------------------===//

struct DropoutRig {
  std::unique_ptr<KernelBackend> backend = createCpuBackend();
  int64_t n = 200000;
  std::vector<float> x, y;
  std::vector<uint8_t> mask;
  float ratio = 0.3f;
  uint8_t training = 1;

  DropoutRig() : x(n), y(n), mask(n) {
    for (int64_t i = 0; i < n; ++i)
      x[i] = float(std::sin(0.37 * double(i)) + 1.5);
  }
  OpSpec spec(uint64_t seed) const {
    OpSpec s;
    s.opType = "Dropout";
    s.name = "/drop";
    s.seed = seed;
    s.inputs = {{DType::F32, {n}}, {DType::F32, {}}, {DType::Bool, {}}};
    s.outputs = {{DType::F32, {n}}, {DType::Bool, {n}}};
    return s;
  }
  std::unique_ptr<Kernel> make(uint64_t seed) {
    std::string err;
    auto k = backend->create(spec(seed), err);
    EXPECT_TRUE(k) << err;
    return k;
  }
  void run(Kernel &k) {
    k.run({{x.data(), {DType::F32, {n}}},
           {&ratio, {DType::F32, {}}},
           {&training, {DType::Bool, {}}}},
          {{y.data(), {DType::F32, {n}}}, {mask.data(), {DType::Bool, {n}}}});
  }
};

TEST(Dropout, MaskStatisticsAndScaling) {
  DropoutRig r;
  r.backend->setNumThreads(2);
  auto k = r.make(42);
  r.run(*k);
  int64_t kept = 0;
  for (int64_t i = 0; i < r.n; ++i) {
    ASSERT_TRUE(r.mask[i] == 0 || r.mask[i] == 1);
    kept += r.mask[i];
    float want = r.mask[i] ? r.x[i] * float(1.0 / (1.0 - r.ratio)) : 0.0f;
    ASSERT_FLOAT_EQ(r.y[i], want) << i;
  }
  double p = double(kept) / double(r.n), q = 1.0 - r.ratio;
  double sigma = std::sqrt(q * (1 - q) / double(r.n));
  EXPECT_NEAR(p, q, 5 * sigma);
  // Neighbouring elements are independent: P(both kept) ~ q^2.
  int64_t pairs = 0;
  for (int64_t i = 0; i + 1 < r.n; i += 2)
    pairs += r.mask[i] && r.mask[i + 1];
  double pq = q * q;
  EXPECT_NEAR(double(pairs) / double(r.n / 2), pq,
              5 * std::sqrt(pq * (1 - pq) / double(r.n / 2)));
}

TEST(Dropout, NewMaskEachStepReproducibleAcrossRunsAndThreads) {
  DropoutRig r;
  r.backend->setNumThreads(2);
  auto k1 = r.make(7);
  r.run(*k1);
  std::vector<uint8_t> step0 = r.mask;
  r.run(*k1);
  std::vector<uint8_t> step1 = r.mask;
  int64_t differ = 0;
  for (int64_t i = 0; i < r.n; ++i)
    differ += step0[i] != step1[i];
  // Independent masks differ with probability 2 q (1 - q) = 0.42.
  EXPECT_NEAR(double(differ) / double(r.n), 0.42, 0.02);

  // Same seed, one thread: the same sequence of masks.
  r.backend->setNumThreads(1);
  auto k2 = r.make(7);
  r.run(*k2);
  EXPECT_EQ(r.mask, step0);
  r.run(*k2);
  EXPECT_EQ(r.mask, step1);

  // Another seed: another mask.
  auto k3 = r.make(8);
  r.run(*k3);
  EXPECT_NE(r.mask, step0);
}

TEST(Dropout, InferenceIsIdentity) {
  DropoutRig r;
  r.training = 0;
  auto k = r.make(1);
  r.run(*k);
  EXPECT_EQ(r.y, r.x);
  for (uint8_t m : r.mask)
    ASSERT_EQ(m, 1);
}

TEST(Dropout, GradMatchesForward) {
  // Y = X * mask / (1 - ratio) is linear in X, so its gradient must satisfy
  // <dY, Y> = <dX, X> for any dY, and dX must vanish where the mask is 0.
  DropoutRig r;
  auto k = r.make(3);
  r.run(*k);
  OpSpec g;
  g.opType = "DropoutGrad";
  g.name = "/drop_grad";
  g.attrs.set("ratio", double(r.ratio));
  g.inputs = {{DType::F32, {r.n}}, {DType::Bool, {r.n}}};
  g.outputs = {{DType::F32, {r.n}}};
  std::string err;
  auto kg = r.backend->create(g, err);
  ASSERT_TRUE(kg) << err;
  std::vector<float> dy(r.n), dx(r.n);
  for (int64_t i = 0; i < r.n; ++i)
    dy[i] = float(std::cos(0.11 * double(i)));
  kg->run({{dy.data(), g.inputs[0]}, {r.mask.data(), g.inputs[1]}},
          {{dx.data(), g.outputs[0]}});
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < r.n; ++i) {
    lhs += double(dy[i]) * r.y[i];
    rhs += double(dx[i]) * r.x[i];
    if (!r.mask[i]) {
      ASSERT_EQ(dx[i], 0.0f);
    }
  }
  EXPECT_NEAR(lhs, rhs, 1e-5 * std::fabs(lhs));
}

/// Every backend draws Dropout's mask from one definition (dropoutKeeps):
/// the same seed gives the same masks, step after step, on the GPU as on
/// the CPU, with the ratio and training flag as operands in the backend's
/// memory; DropoutGrad agrees too.
TEST(DropoutOnCuda, DrawsTheCpuMask) {
  std::string why;
  KernelBackend *cuda = sharedBackend("cuda", why);
  if (!cuda)
    GTEST_SKIP() << "no cuda backend here: "
                 << (why.empty() ? "a build without CUDA" : why);
  DropoutRig r;
  auto kc = r.make(11);
  std::string err;
  auto kd = cuda->create(r.spec(11), err);
  ASSERT_TRUE(kd) << err;
  Buffer x(*cuda, r.n * 4), y(*cuda, r.n * 4), m(*cuda, r.n), ratio(*cuda, 4),
      training(*cuda, 1);
  cuda->copyToDevice(x.data, r.x.data(), r.n * 4);
  cuda->copyToDevice(ratio.data, &r.ratio, 4);
  cuda->copyToDevice(training.data, &r.training, 1);
  std::vector<float> y2(r.n);
  std::vector<uint8_t> m2(r.n);
  for (int step = 0; step < 3; ++step) {
    r.run(*kc);
    kd->run({{x.data, {DType::F32, {r.n}}},
             {ratio.data, {DType::F32, {}}},
             {training.data, {DType::Bool, {}}}},
            {{y.data, {DType::F32, {r.n}}}, {m.data, {DType::Bool, {r.n}}}});
    cuda->copyToHost(y2.data(), y.data, r.n * 4);
    cuda->copyToHost(m2.data(), m.data, r.n);
    ASSERT_EQ(m2, r.mask) << "step " << step;
    ASSERT_EQ(y2, r.y) << "step " << step;
  }
  OpSpec g;
  g.opType = "DropoutGrad";
  g.name = "/drop_grad";
  g.attrs.set("ratio", double(r.ratio));
  g.inputs = {{DType::F32, {r.n}}, {DType::Bool, {r.n}}};
  g.outputs = {{DType::F32, {r.n}}};
  auto gc = r.backend->create(g, err), gd = cuda->create(g, err);
  ASSERT_TRUE(gc && gd) << err;
  std::vector<float> dx(r.n), dx2(r.n);
  gc->run({{r.x.data(), g.inputs[0]}, {r.mask.data(), g.inputs[1]}},
          {{dx.data(), g.outputs[0]}});
  gd->run({{x.data, g.inputs[0]}, {m.data, g.inputs[1]}},
          {{y.data, g.outputs[0]}});
  cuda->copyToHost(dx2.data(), y.data, r.n * 4);
  EXPECT_EQ(dx2, dx);
}

//===----------------------------------------------------------------------===//
// Run-time scratch in the executor's workspace
//===----------------------------------------------------------------------===//

/// Runs `spec` on seeded inputs, once with the kernel's own scratch and then
/// twice with a workspace poisoned with NaN before each run: the blocked
/// copies and scratchpads must live in the workspace (nonzero size), be
/// fully rewritten every run, and give bitwise the same results.
static void checkWorkspace(const OpSpec &spec) {
  auto backend = createCpuBackend();
  std::string err;
  auto own = backend->create(spec, err), placed = backend->create(spec, err);
  ASSERT_TRUE(own && placed) << err;
  ASSERT_GT(placed->workspaceBytes(), 0u) << spec.opType;
  std::vector<std::vector<float>> in, outA, outB;
  std::vector<TensorRef> inRefs, refsA, refsB;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    in.emplace_back(spec.inputs[i].numel());
    for (size_t k = 0; k < in.back().size(); ++k)
      in.back()[k] = float(std::sin(0.37 * double(k) + double(i)));
  }
  for (const TensorDesc &d : spec.outputs) {
    outA.emplace_back(d.numel());
    outB.emplace_back(d.numel());
  }
  for (size_t i = 0; i < in.size(); ++i)
    inRefs.push_back({in[i].data(), spec.inputs[i]});
  for (size_t i = 0; i < outA.size(); ++i) {
    refsA.push_back({outA[i].data(), spec.outputs[i]});
    refsB.push_back({outB[i].data(), spec.outputs[i]});
  }
  own->run(inRefs, refsA);
  std::vector<float> ws((placed->workspaceBytes() + 63) / 4 + 16);
  float *base = reinterpret_cast<float *>(
      (reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t(63));
  placed->setWorkspace(base);
  for (int round = 0; round < 2; ++round) {
    std::fill(ws.begin(), ws.end(), std::nanf(""));
    placed->run(inRefs, refsB);
    for (size_t i = 0; i < outA.size(); ++i)
      EXPECT_EQ(0, std::memcmp(outA[i].data(), outB[i].data(),
                               outA[i].size() * sizeof(float)))
          << spec.opType << " result " << i << " round " << round;
  }
}

TEST(KernelWorkspace, ConvBlockedCopiesLiveInTheWorkspace) {
  OpSpec s;
  s.opType = "Conv";
  s.name = "/conv";
  s.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  s.inputs = {{DType::F32, {2, 16, 10, 10}},
              {DType::F32, {32, 16, 3, 3}},
              {DType::F32, {32}}};
  s.outputs = {{DType::F32, {2, 32, 10, 10}}};
  checkWorkspace(s);
}

TEST(KernelWorkspace, ConvGradBlockedCopiesLiveInTheWorkspace) {
  OpSpec s;
  s.opType = "ConvGrad";
  s.name = "/conv_grad";
  s.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  s.inputs = {{DType::F32, {2, 32, 10, 10}},
              {DType::F32, {2, 16, 10, 10}},
              {DType::F32, {32, 16, 3, 3}}};
  s.outputs = {{DType::F32, {2, 16, 10, 10}},
               {DType::F32, {32, 16, 3, 3}},
               {DType::F32, {32}}};
  checkWorkspace(s);
}

/// Bidirectional LSTMGrad: the recomputed forward's workspace, the packed
/// weights and the gradients oneDNN accumulates into are all scratch, and
/// must be rewritten (or zeroed) every run.
TEST(KernelWorkspace, LstmGradScratchLivesInTheWorkspace) {
  OpSpec s;
  s.opType = "LSTMGrad";
  s.name = "/rnn/LSTM_grad";
  s.attrs.set("direction", std::string("bidirectional"));
  s.attrs.set("hidden_size", int64_t(6));
  TensorDesc x{DType::F32, {5, 3, 4}}, w{DType::F32, {2, 24, 4}},
      r{DType::F32, {2, 24, 6}}, b{DType::F32, {2, 48}},
      h{DType::F32, {2, 3, 6}}, y{DType::F32, {5, 2, 3, 6}};
  s.inputs = {x, w, r, b, h, h, y, h, h};
  s.outputs = {x, w, r, b, h, h};
  checkWorkspace(s);
}

//===----------------------------------------------------------------------===//
// Malformed nodes are refused with errors naming them
//===----------------------------------------------------------------------===//

class BadSpec : public ::testing::Test {
protected:
  std::unique_ptr<KernelBackend> backend = createCpuBackend();

  /// Expects create() to fail with an error naming the node and containing
  /// `fragment`.
  void expectError(const OpSpec &spec, const std::string &fragment) {
    std::string err;
    auto k = backend->create(spec, err);
    EXPECT_FALSE(k);
    EXPECT_NE(err.find("'" + spec.name + "'"), std::string::npos) << err;
    EXPECT_NE(err.find(spec.opType), std::string::npos) << err;
    EXPECT_NE(err.find(fragment), std::string::npos) << err;
  }
  static OpSpec conv() {
    OpSpec s;
    s.opType = "Conv";
    s.name = "/layer1/conv";
    s.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    s.inputs = {{DType::F32, {2, 3, 8, 8}}, {DType::F32, {4, 3, 3, 3}}};
    s.outputs = {{DType::F32, {2, 4, 8, 8}}};
    return s;
  }
};

TEST_F(BadSpec, ValidConvIsAccepted) {
  std::string err;
  EXPECT_TRUE(backend->create(conv(), err)) << err;
}

TEST_F(BadSpec, UnsupportedOp) {
  OpSpec s;
  s.opType = "NonMaxSuppression";
  s.name = "/postprocess/nms";
  s.inputs = {{DType::F32, {1, 4}}};
  s.outputs = {{DType::I64, {1, 3}}};
  expectError(s, "not supported by the cpu backend");
}

TEST_F(BadSpec, WrongOperandCount) {
  OpSpec s = conv();
  s.inputs.resize(1);
  expectError(s, "expects 2..3 operands, got 1");
  OpSpec r;
  r.opType = "Relu";
  r.name = "/relu";
  r.inputs = {{DType::F32, {4}}, {DType::F32, {4}}};
  r.outputs = {{DType::F32, {4}}};
  expectError(r, "expects 1 operands, got 2");
}

TEST_F(BadSpec, WrongResultCount) {
  OpSpec s = conv();
  s.name = "/convgrad";
  s.opType = "ConvGrad";
  s.inputs = {{DType::F32, {2, 4, 8, 8}}, s.inputs[0], s.inputs[1]};
  s.outputs = {s.inputs[1]};
  expectError(s, "expects 2..3 results, got 1");
}

TEST_F(BadSpec, UnsupportedDType) {
  OpSpec s = conv();
  s.inputs[0].dtype = DType::I64;
  expectError(s, "operand 0 has element type i64, expected f32");
}

// A 16-bit operand is no error: the CPU backend runs a kernel without an
// f16 path on widened copies (docs/precision.md).
TEST_F(BadSpec, SixteenBitOperandsRunWidened) {
  OpSpec s = conv();
  s.inputs[0].dtype = DType::F16;
  std::string err;
  EXPECT_TRUE(createCpuBackend()->create(s, err)) << err;
}

TEST_F(BadSpec, UnsupportedAttributes) {
  OpSpec s = conv();
  s.attrs.set("auto_pad", std::string("SAME_SIDEWAYS"));
  expectError(s, "auto_pad 'SAME_SIDEWAYS' is not supported");

  OpSpec p;
  p.opType = "Pad";
  p.name = "/pad";
  p.attrs.set("mode", std::string("reflect"));
  p.attrs.set("pads", std::vector<int64_t>{1, 1});
  p.inputs = {{DType::F32, {4}}};
  p.outputs = {{DType::F32, {6}}};
  expectError(p, "mode 'reflect' is not supported");

  OpSpec m;
  m.opType = "MaxPool";
  m.name = "/pool";
  m.attrs.set("kernel_shape", std::vector<int64_t>{2, 2});
  m.attrs.set("storage_order", int64_t(1));
  m.inputs = {{DType::F32, {1, 1, 4, 4}}};
  m.outputs = {{DType::F32, {1, 1, 3, 3}}};
  expectError(m, "storage_order = 1 is not supported");
}

TEST_F(BadSpec, InconsistentShapes) {
  OpSpec s = conv();
  s.outputs[0].shape = {2, 4, 7, 7};
  expectError(s, "does not match the window");
  OpSpec g = conv();
  g.attrs.set("group", int64_t(2));
  expectError(g, "inconsistent channels");
  OpSpec a;
  a.opType = "Add";
  a.name = "/add";
  a.inputs = {{DType::F32, {3, 4}}, {DType::F32, {5}}};
  a.outputs = {{DType::F32, {3, 4}}};
  expectError(a, "does not broadcast");
}

/// CumSum's axis must be an integer constant on the tensor; GatherElements'
/// and ScatterElements' indices of the data's rank, constant ones within
/// the axis; a reduction other than none or add is refused.
TEST_F(BadSpec, CumSumAndElements) {
  auto i64 = [](int64_t v) {
    std::vector<char> b(8);
    std::memcpy(b.data(), &v, 8);
    return b;
  };
  OpSpec c;
  c.opType = "CumSum";
  c.name = "/cumsum";
  c.inputs = {{DType::F32, {3, 4}}, {DType::I64, {}}};
  c.outputs = {{DType::F32, {3, 4}}};
  expectError(c, "the axis must be an integer constant");
  c.inputValues = {{}, i64(2)};
  expectError(c, "axis 2 is outside [-2, 2)");
  OpSpec g;
  g.opType = "GatherElements";
  g.name = "/gather";
  g.attrs.set("axis", int64_t(1));
  g.inputs = {{DType::F32, {3, 4}}, {DType::I64, {3}}};
  g.outputs = {{DType::F32, {3}}};
  expectError(g, "indices must have the data's rank");
  g.inputs[1] = {DType::I64, {1, 2}};
  g.outputs[0] = {DType::F32, {1, 2}};
  std::vector<char> idx(16);
  int64_t vals[2] = {1, 4};
  std::memcpy(idx.data(), vals, 16);
  g.inputValues = {{}, idx};
  expectError(g, "index 4 at 1 is outside [-4, 4)");
  OpSpec s;
  s.opType = "ScatterElements";
  s.name = "/scatter";
  s.attrs.set("reduction", std::string("max"));
  s.inputs = {{DType::F32, {3, 4}}, {DType::I64, {1, 2}}, {DType::F32, {1, 2}}};
  s.outputs = {{DType::F32, {3, 4}}};
  expectError(s, "reduction 'max' is not supported");
}

/// An index a step's input carries outside its dimension ends the run with
/// exit status 1 and a message naming the node (not an abort).
TEST_F(BadSpec, RunTimeIndexOutsideItsDimensionExitsNamingTheNode) {
  OpSpec g;
  g.opType = "GatherND";
  g.name = "/gather_nd";
  g.inputs = {{DType::F32, {3, 4}}, {DType::I64, {2, 2}}};
  g.outputs = {{DType::F32, {2}}};
  std::string err;
  auto k = backend->create(g, err);
  ASSERT_TRUE(k) << err;
  std::vector<float> data(12, 1.0f), y(2);
  std::vector<int64_t> idx = {0, 1, 2, 9};
  TensorRef in0{data.data(), g.inputs[0]}, in1{idx.data(), g.inputs[1]},
      out{y.data(), g.outputs[0]};
  EXPECT_EXIT(k->run({in0, in1}, {out}), ::testing::ExitedWithCode(1),
              "oasr: error: node '/gather_nd' \\(GatherND\\): index 9 of "
              "tuple 1 is outside its dimension");
}

/// Each malformed FusedAttention(Grad) a module could carry is refused at
/// creation, naming the node and the fault.
TEST_F(BadSpec, AttentionShapesTypesAndMask) {
  auto attn = [] {
    OpSpec s;
    s.opType = "FusedAttention";
    s.name = "/encoder/layers.0/self_attn/Softmax";
    s.attrs.set("scale", 0.125);
    s.inputs = {{DType::F32, {6, 4, 8}},
                {DType::F32, {6, 8, 5}},
                {DType::F32, {6, 5, 3}},
                {DType::Bool, {6, 1, 5}}};
    s.outputs = {{DType::F32, {6, 4, 3}}};
    return s;
  };
  std::string err;
  EXPECT_TRUE(backend->create(attn(), err)) << err;
  OpSpec s = attn();
  s.inputs.resize(2);
  expectError(s, "expects 3..4 operands, got 2");
  s = attn();
  s.inputs[1].shape = {6, 8};
  expectError(s, "must be of one rank, at least 2");
  s = attn();
  s.inputs[2].shape = {3, 5, 3};
  expectError(s, "do not share one batch shape");
  s = attn();
  s.inputs[1].shape = {6, 7, 5};
  expectError(s, "are not [..., M, D], [..., D, N], [..., N, E]");
  s = attn();
  s.outputs[0].shape = {6, 4, 8};
  expectError(s, "Y is [6, 4, 8], expected [6, 4, 3]");
  s = attn();
  for (TensorDesc &t : s.inputs)
    if (t.dtype == DType::F32)
      t.dtype = DType::I64;
  s.outputs[0].dtype = DType::I64;
  expectError(s, "Q has element type i64, expected f32 or bf16");
  s = attn();
  s.inputs[2].dtype = DType::I64;
  expectError(s, "must be of one type; found f32 and i64");
  // A bf16 operand among f32 ones runs on widened copies.
  s = attn();
  s.inputs[2].dtype = DType::BF16;
  EXPECT_TRUE(backend->create(s, err)) << err;
  s = attn();
  s.inputs[3].dtype = DType::F32;
  expectError(s, "the mask has element type f32, expected bool");
  s = attn();
  s.inputs[3].shape = {6, 4, 4};
  expectError(s, "the mask [6, 4, 4] does not broadcast onto the scores "
                 "[6, 4, 5]");
  s = attn();
  s.attrs.set("scale", std::numeric_limits<double>::infinity());
  expectError(s, "scale must be finite");
  OpSpec g = attn();
  g.opType = "FusedAttentionGrad";
  g.inputs.insert(g.inputs.begin(), {DType::F32, {6, 4, 3}});
  g.outputs = {g.inputs[1], g.inputs[2], g.inputs[3]};
  EXPECT_TRUE(backend->create(g, err)) << err;
  OpSpec bad = g;
  bad.inputs[0].shape = {6, 4, 4};
  expectError(bad, "dY is [6, 4, 4], expected [6, 4, 3]");
  bad = g;
  bad.outputs[1].shape = {6, 8, 4};
  expectError(bad, "result 1 is [6, 8, 4], expected its operand's [6, 8, 5]");
  bad = g;
  bad.outputs.resize(1);
  expectError(bad, "expects 3 results, got 1");
}

/// What the LSTM/GRU kernels do not implement is refused at creation.
TEST_F(BadSpec, RecurrentAttributesAndOperands) {
  auto lstm = [] {
    OpSpec s;
    s.opType = "LSTM";
    s.name = "/rnn/LSTM";
    s.attrs.set("hidden_size", int64_t(6));
    s.inputs = {{DType::F32, {5, 3, 4}},
                {DType::F32, {1, 24, 4}},
                {DType::F32, {1, 24, 6}}};
    s.outputs = {{DType::F32, {5, 1, 3, 6}}};
    return s;
  };
  std::string err;
  EXPECT_TRUE(backend->create(lstm(), err)) << err;
  OpSpec s = lstm();
  s.attrs.set("activations",
              std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"});
  EXPECT_TRUE(backend->create(s, err)) << err;

  s = lstm();
  s.attrs.set("clip", 3.0);
  expectError(s, "clip is not supported");
  s = lstm();
  s.attrs.set("layout", int64_t(1));
  expectError(s, "layout=1 (batch first) is not supported");
  s = lstm();
  s.attrs.set("activation_alpha", std::vector<double>{0.1});
  expectError(s, "activation_alpha/activation_beta are not supported");
  s = lstm();
  s.attrs.set("input_forget", int64_t(1));
  expectError(s, "input_forget=1 is not supported");
  s = lstm();
  s.attrs.set("direction", std::string("sideways"));
  expectError(s, "direction 'sideways' is not one of forward, reverse, "
                 "bidirectional");
  s = lstm();
  s.attrs.set("activations",
              std::vector<std::string>{"Sigmoid", "Relu", "Tanh"});
  expectError(s, "activations [Sigmoid, Relu, Tanh] are not supported "
                 "(oneDNN implements only the default [Sigmoid, Tanh, Tanh])");
  s = lstm();
  s.attrs.set("hidden_size", int64_t(8));
  expectError(s, "hidden_size=8 does not match W [1, 24, 4]");
  s = lstm();
  s.inputs.push_back({DType::F32, {1, 48}});
  s.inputs.push_back({DType::I32, {3}});
  expectError(s, "sequence_lens is not supported");
  s = lstm();
  s.inputs.resize(7);
  s.inputs.push_back({DType::F32, {1, 18}});
  expectError(s, "peephole weights (input P) are not supported");
  s = lstm();
  s.inputs.push_back({DType::F32, {1, 40}});
  expectError(s, "operand #3 has shape [1, 40], expected [1, 48]");
  s = lstm();
  s.inputs[1].shape = {1, 22, 4};
  expectError(s, "X [5, 3, 4] and W [1, 22, 4] must be [T, N, I] and [D, "
                 "4*H, I]");
  s = lstm();
  s.outputs[0].shape = {5, 3, 6};
  expectError(s, "result #0 has shape [5, 3, 6], expected [5, 1, 3, 6]");

  OpSpec g;
  g.opType = "GRU";
  g.name = "/rnn/GRU";
  g.attrs.set("linear_before_reset", int64_t(2));
  g.inputs = {{DType::F32, {5, 3, 4}},
              {DType::F32, {1, 18, 4}},
              {DType::F32, {1, 18, 6}}};
  g.outputs = {{DType::F32, {5, 1, 3, 6}}};
  expectError(g, "linear_before_reset must be 0 or 1, got 2");
}

//===----------------------------------------------------------------------===//
// Interface pieces
//===----------------------------------------------------------------------===//

TEST(KernelInterface, AttrMapAndDTypes) {
  AttrMap m;
  m.set("i", int64_t(3));
  m.set("f", 0.5);
  m.set("s", std::string("mean"));
  m.set("is", std::vector<int64_t>{1, 2});
  EXPECT_EQ(m.getInt("i"), 3);
  EXPECT_EQ(m.getInt("missing", 7), 7);
  EXPECT_EQ(m.getFloat("f"), 0.5);
  EXPECT_EQ(m.getFloat("i"), 3.0);
  EXPECT_EQ(m.getString("s"), "mean");
  EXPECT_EQ(m.getString("i", "x"), "x");
  EXPECT_EQ(m.getInts("is"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(m.getInts("i"), (std::vector<int64_t>{3}));
  m.set("ss", std::vector<std::string>{"Sigmoid", "Tanh"});
  EXPECT_EQ(m.getStrings("ss"), (std::vector<std::string>{"Sigmoid", "Tanh"}));
  EXPECT_EQ(m.getStrings("s"), (std::vector<std::string>{"mean"}));
  EXPECT_TRUE(m.getStrings("i").empty());
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_EQ(dtypeSize(DType::Bool), 1u);
  EXPECT_STREQ(dtypeName(DType::F16), "f16");
  EXPECT_STREQ(dtypeName(DType::Bool), "i1");
}

TEST(KernelInterface, ConstantAndAliasedViews) {
  auto backend = createCpuBackend();
  OpSpec c;
  c.opType = "Constant";
  c.name = "/const";
  c.attrs.set("value", std::vector<int64_t>{4, -1});
  c.outputs = {{DType::I64, {2}}};
  std::string err;
  auto k = backend->create(c, err);
  ASSERT_TRUE(k) << err;
  int64_t out[2] = {0, 0};
  k->run({}, {{out, c.outputs[0]}});
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[1], -1);

  // A view the executor aliased (result buffer == operand buffer) is a no-op.
  OpSpec r;
  r.opType = "Reshape";
  r.name = "/reshape";
  r.inputs = {{DType::F32, {2, 3}}, {DType::I64, {1}}};
  r.outputs = {{DType::F32, {6}}};
  auto kr = backend->create(r, err);
  ASSERT_TRUE(kr) << err;
  float buf[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[1] = {6};
  kr->run({{buf, r.inputs[0]}, {shape, r.inputs[1]}}, {{buf, r.outputs[0]}});
  EXPECT_EQ(buf[5], 6.0f);
}

/// The shared factory prologues (OpGeometry: checkSpec, checkSameShapes,
/// checkSameShapeF32, normAxis) seen through kernels of each CPU family:
/// the first failing check names the node and says what is wrong.
TEST(KernelInterface, PrologueErrors) {
  auto backend = createCpuBackend();
  auto errorOf = [&](const std::string &op, std::vector<TensorDesc> ins,
                     std::vector<TensorDesc> outs, AttrMap attrs = {}) {
    OpSpec s;
    s.opType = op;
    s.name = "/n";
    s.inputs = std::move(ins);
    s.outputs = std::move(outs);
    s.attrs = std::move(attrs);
    std::string err;
    return backend->create(s, err) ? std::string("<created>") : err;
  };
  const TensorDesc f23{DType::F32, {2, 3}}, f32x{DType::F32, {3, 2}},
      i23{DType::I64, {2, 3}};
  // checkSameShapeF32: GeluGrad (transformer), SigmoidGrad (pointwise),
  // Softmax (oneDNN) -- arity, element type, shape.
  EXPECT_EQ(errorOf("GeluGrad", {f23}, {f23}),
            "node '/n' (GeluGrad): expects 2 operands, got 1");
  EXPECT_EQ(errorOf("GeluGrad", {f23, i23}, {f23}),
            "node '/n' (GeluGrad): operand 1 has element type i64, expected "
            "f32");
  EXPECT_EQ(errorOf("GeluGrad", {f23, f32x}, {f23}),
            "node '/n' (GeluGrad): operands and result must have one shape");
  EXPECT_EQ(errorOf("Softmax", {f32x}, {f23}),
            "node '/n' (Softmax): operands and result must have one shape");
  EXPECT_EQ(errorOf("Gelu", {f23}, {f23}), "<created>");
  // checkSameShapes on the first operands only: Clip's min/max are scalars.
  EXPECT_EQ(errorOf("ClipGrad", {f23, f32x}, {f23}),
            "node '/n' (ClipGrad): operands and result must have one shape");
  EXPECT_EQ(errorOf("Clip", {f23, {DType::F32, {}}}, {f23}), "<created>");
  // normAxis: Concat (shape family), negative and out of range.
  AttrMap axis;
  axis.set("axis", int64_t(-3));
  EXPECT_EQ(errorOf("Concat", {f23, f23}, {{DType::F32, {4, 3}}}, axis),
            "node '/n' (Concat): axis -3 out of range for rank 2");
  axis.set("axis", int64_t(-2));
  EXPECT_EQ(errorOf("Concat", {f23, f23}, {{DType::F32, {4, 3}}}, axis),
            "<created>");
}

} // namespace
