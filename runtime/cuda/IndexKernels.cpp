//===- IndexKernels.cpp - Selection by index
//--------------------------------===//
//
// The ops of the CPU backend's IndexKernels.cpp: ArgMax/ArgMin, TopK,
// OneHot and GatherND, on the shared geometry (OpGeometry.h) and line rules
// (KernelMath.h); the device code is in CudaPointwise.cu.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

namespace oasr::rt::cuda {

static KernelOr createArg(CudaBackend &be, const OpSpec &spec) {
  ArgGeom g;
  OASR_RETURN_IF_ERROR(argGeom(spec, g));
  return lambda(be, spec, [g](cudaStream_t s, const auto &in, const auto &out) {
    launchArg(g, in[0].template as<float>(), out[0].template as<int64_t>(), s);
  });
}

static KernelOr createTopK(CudaBackend &be, const OpSpec &spec) {
  TopKGeom g;
  OASR_RETURN_IF_ERROR(topKGeom(spec, g));
  return lambda(be, spec, [g](cudaStream_t s, const auto &in, const auto &out) {
    launchTopK(g, in[0].template as<float>(), out[0].template as<float>(),
               out[1].template as<int64_t>(), s);
  });
}

static KernelOr createOneHot(CudaBackend &be, const OpSpec &spec) {
  OneHotGeom g;
  OASR_RETURN_IF_ERROR(oneHotGeom(spec, g));
  size_t elem = dtypeSize(spec.outputs[0].dtype);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchOneHot(g, in[0].data, in[2].data, out[0].data, elem, s);
  });
}

static KernelOr createGatherND(CudaBackend &be, const OpSpec &spec) {
  ScatterNDGeom g;
  OASR_RETURN_IF_ERROR(gatherNDGeom(spec, g));
  size_t elem = dtypeSize(spec.inputs[0].dtype);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchGatherND(g, in[0].data, in[1].template as<int64_t>(), out[0].data,
                   elem, s);
  });
}

void registerIndexKernels(FactoryRegistry &r) {
  r["ArgMax"] = createArg;
  r["ArgMin"] = createArg;
  r["TopK"] = createTopK;
  r["OneHot"] = createOneHot;
  r["GatherND"] = createGatherND;
}

} // namespace oasr::rt::cuda
