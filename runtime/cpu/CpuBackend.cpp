//===- CpuBackend.cpp - The oneDNN CPU kernel backend ---------------------===//
//
// createCpuBackend(): host memory, the op-type → kernel registry and
// threading.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "VectorSums.h"

#include <omp.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace oasr::rt::cpu {

/// Whether oneDNN's effective ISA includes `isa`: the values are bit masks
/// of features (AVX2-VNNI's is numerically above AVX-512's).
static bool dispatchesTo(dnnl::cpu_isa isa) {
  unsigned have = unsigned(dnnl::get_effective_cpu_isa());
  return (have & unsigned(isa)) == unsigned(isa);
}

VectorIsa vectorIsa() {
  static const VectorIsa isa = [] {
    if (dispatchesTo(dnnl::cpu_isa::avx512_core) &&
        __builtin_cpu_supports("avx512f"))
      return VectorIsa::Avx512;
    if (dispatchesTo(dnnl::cpu_isa::avx2) && __builtin_cpu_supports("avx2"))
      return VectorIsa::Avx2;
    return VectorIsa::Baseline;
  }();
  return isa;
}

const char *vectorIsaName(VectorIsa isa) {
  switch (isa) {
  case VectorIsa::Avx512:
    return "avx512";
  case VectorIsa::Avx2:
    return "avx2";
  case VectorIsa::Baseline:
    break;
  }
  return "baseline";
}

dnnl::engine &engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream &stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

static std::atomic<int> gNumThreads{0};

/// OpenMP's own choice (OMP_NUM_THREADS or the core count), taken before
/// the backend first changes it.
static int defaultNumThreads() {
  static int n = omp_get_max_threads();
  return n;
}

int numThreads() { return gNumThreads.load(std::memory_order_relaxed); }

void setNumThreads(int threads) {
  int dflt = defaultNumThreads();
  gNumThreads.store(threads > 0 ? threads : dflt, std::memory_order_relaxed);
  applyNumThreads();
}

void applyNumThreads() {
  int n = numThreads();
  if (n > 0 && omp_get_max_threads() != n)
    omp_set_num_threads(n);
}

static size_t alignScratch(size_t bytes) { return (bytes + 63) & ~size_t(63); }

void CpuKernel::addScratch(const dnnl::memory &m) {
  scratch.push_back(m);
  scratchBytes += alignScratch(m.get_desc().get_size());
}

dnnl::memory CpuKernel::scratchpad(const dnnl::primitive_desc_base &pd) {
  dnnl::memory::desc md = pd.scratchpad_desc();
  if (md.get_size() == 0)
    return dnnl::memory();
  dnnl::memory m(md, engine(), DNNL_MEMORY_NONE);
  addScratch(m);
  return m;
}

void CpuKernel::placeScratch(char *base) {
  for (dnnl::memory &m : scratch) {
    m.set_data_handle(base);
    base += alignScratch(m.get_desc().get_size());
  }
  scratchPlaced = true;
}

void CpuKernel::setWorkspace(void *ptr) {
  placeScratch(static_cast<char *>(ptr));
}

dnnl::primitive_attr userScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void CpuKernel::run(const std::vector<TensorRef> &inputs,
                    const std::vector<TensorRef> &outputs) {
  KernelScope scope(nodeName, op);
  if (scratchBytes && !scratchPlaced) {
    ownScratch.reset(static_cast<char *>(std::aligned_alloc(64, scratchBytes)));
    if (!ownScratch)
      fatalKernelError("cannot allocate " + std::to_string(scratchBytes) +
                       " bytes of kernel workspace");
    placeScratch(ownScratch.get());
  }
  applyNumThreads();
  try {
    compute(inputs, outputs);
  } catch (const dnnl::error &e) {
    fatalKernelError(std::string("oneDNN failed: ") + e.what());
  }
}

dnnl::memory::dims toDims(const std::vector<int64_t> &shape) {
  return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::memory::format_tag plainTag(size_t rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
  case 1:
    return tag::a;
  case 2:
    return tag::ab;
  case 3:
    return tag::abc;
  case 4:
    return tag::abcd;
  case 5:
    return tag::abcde;
  case 6:
    return tag::abcdef;
  default:
    return tag::undef;
  }
}

dnnl::memory::desc plainDesc(const std::vector<int64_t> &shape,
                             dnnl::memory::data_type dt) {
  // Strides rather than tags so any rank up to oneDNN's limit works.
  dnnl::memory::dims dims = toDims(shape), strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  if (dims.empty())
    return dnnl::memory::desc({1}, dt, dnnl::memory::dims{1});
  return dnnl::memory::desc(dims, dt, strides);
}

/// Every family's kernels: the one list the backend and cpuKernelOps() use.
static void registerCpuKernels(KernelRegistry &registry) {
  registerConvKernels(registry);
  registerGemmKernels(registry);
  registerNormKernels(registry);
  registerPoolKernels(registry);
  registerDropoutKernels(registry);
  registerLossKernels(registry);
  registerPointwiseKernels(registry);
  registerIndexKernels(registry);
  registerShapeKernels(registry);
  registerArithmeticKernels(registry);
  registerLowPrecisionKernels(registry);
  registerRecurrentKernels(registry);
  registerAttentionKernels(registry);
}

namespace {

class CpuBackend final : public KernelBackend {
public:
  CpuBackend() {
    (void)defaultNumThreads();
    registerCpuKernels(registry);
  }

  const char *name() const override { return "cpu"; }
  bool hostAddressable() const override { return true; }
  bool supportsUpdate(const std::string &algo) const override {
    return isStandardUpdate(algo);
  }
  bool updatesWeightCopies() const override { return true; }
  void update(const UpdateRule &rule, int64_t t,
              const std::vector<TensorRef> &in,
              const std::vector<TensorRef> &out) override {
    cpu::update(rule, t, in, out);
  }

  KernelOr createKernel(const OpSpec &spec) override {
    return createRegistered(registry, spec, "cpu",
                            [&](const KernelFactory &factory) {
                              applyNumThreads();
                              if (hasLowFloat(spec))
                                return createLowPrecision(spec, factory);
                              return factory(spec);
                            });
  }

  Status setPrecision(const std::string &precision,
                      std::string &warning) override {
    if (precision == "f32")
      return Status::success();
    if (precision == "tf32")
      return Status::error(
          "TF32 is a GPU tensor-core format and this CPU has no TF32 "
          "arithmetic; use --precision=bf16 for mixed precision on the "
          "CPU, or --device=cuda");
    if (precision == "bf16") {
      if (!dispatchesTo(dnnl::cpu_isa::avx512_core_bf16))
        warning = "this CPU has no AVX512-BF16 or AMX: oneDNN emulates bf16 "
                  "products with f32 arithmetic, about as fast as f32 or "
                  "slower; the memory saving remains";
      return Status::success();
    }
    if (precision == "f16") {
      warning = "oneDNN " + std::to_string(DNNL_VERSION_MAJOR) + "." +
                std::to_string(DNNL_VERSION_MINOR) +
                " has no f16 CPU kernels: f16 tensors are stored in 16 bits "
                "and computed by the f32 kernels (no speed-up; use bf16 on "
                "the CPU)";
      return Status::success();
    }
    return KernelBackend::setPrecision(precision, warning);
  }

  void *allocate(size_t bytes) override {
    // 64-byte alignment suits AVX-512 loads and oneDNN's preferences.
    size_t rounded = (bytes + 63) / 64 * 64;
    return std::aligned_alloc(64, rounded ? rounded : 64);
  }
  void deallocate(void *ptr) override { std::free(ptr); }
  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (dst != src && bytes)
      std::memcpy(dst, src, bytes);
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    if (dst != src && bytes)
      std::memcpy(dst, src, bytes);
  }
  void setNumThreads(int threads) override { cpu::setNumThreads(threads); }

private:
  KernelRegistry registry;
};

} // namespace
} // namespace oasr::rt::cpu

namespace oasr::rt {
std::unique_ptr<KernelBackend> createCpuBackend() {
  return std::make_unique<cpu::CpuBackend>();
}

std::string describeCpu() {
  using dnnl::cpu_isa;
  static const std::pair<cpu_isa, const char *> names[] = {
      {cpu_isa::sse41, "sse41"},
      {cpu_isa::avx, "avx"},
      {cpu_isa::avx2, "avx2"},
      {cpu_isa::avx2_vnni, "avx2_vnni"},
      {cpu_isa::avx512_core, "avx512_core"},
      {cpu_isa::avx512_core_vnni, "avx512_core_vnni"},
      {cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
      {cpu_isa::avx512_core_amx, "avx512_core_amx"}};
  const char *isa = "other";
  for (const auto &[value, name] : names)
    if (value == dnnl::get_effective_cpu_isa())
      isa = name;
  const dnnl_version_t *v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
         "." + std::to_string(v->patch) + ", ISA " + isa + "; vector loops " +
         cpu::vectorIsaName(cpu::vectorIsa());
}

std::vector<std::string> cpuKernelOps() {
  cpu::KernelRegistry registry;
  cpu::registerCpuKernels(registry);
  std::vector<std::string> ops;
  for (const auto &entry : registry)
    ops.push_back(entry.first);
  return ops;
}
} // namespace oasr::rt
