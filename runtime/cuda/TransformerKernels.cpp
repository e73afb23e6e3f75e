//===- TransformerKernels.cpp - Gather, softmax, LayerNorm ----------------===//
//
// Gather/GatherGrad, Softmax/LogSoftmax and LayerNormalization with their
// gradients: the CPU backend's TransformerKernels.cpp family; device code
// in CudaPointwise.cu.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace oasr::rt::cuda {

namespace {

/// True when operand `i` (Gather's indices) holds no index twice: one
/// index, or a constant of the program (OpSpec::inputValues) without
/// repeats. Negative indices count from the end of `axisDim`.
bool distinctIndices(const OpSpec &spec, size_t i) {
  const TensorDesc &idx = spec.inputs[i];
  if (idx.numel() == 1)
    return true;
  if (i >= spec.inputValues.size() || spec.inputValues[i].size() != idx.bytes())
    return false;
  std::set<int64_t> seen;
  const char *raw = spec.inputValues[i].data();
  for (int64_t k = 0; k < idx.numel(); ++k) {
    int64_t v;
    if (idx.dtype == DType::I64) {
      std::memcpy(&v, raw + k * 8, 8);
    } else {
      int32_t w;
      std::memcpy(&w, raw + k * 4, 4);
      v = w;
    }
    if (v < 0) // may name the same row as a non-negative one
      return false;
    if (!seen.insert(v).second)
      return false;
  }
  return true;
}

} // namespace

/// Gather {axis}: data, indices -> Y; GatherGrad {axis}: shape, indices, dY
/// -> dX.
std::unique_ptr<Kernel> createGather(CudaBackend &be, const OpSpec &spec,
                                     std::string &error) {
  bool grad = spec.opType == "GatherGrad";
  if (!checkArity(spec, grad ? 3 : 2, grad ? 3 : 2, 1, 1, error))
    return nullptr;
  const TensorDesc &data = grad ? spec.outputs[0] : spec.inputs[0];
  const TensorDesc &idx = spec.inputs[grad ? 1 : 1];
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32) {
    error = nodeError(spec, "indices must be i64 or i32");
    return nullptr;
  }
  // Distinct indices (one, or a constant list without repeats) scatter
  // with plain stores, f32 or bf16; repeats accumulate f32 atomically.
  bool distinct = grad && distinctIndices(spec, 1);
  if (grad && !checkAllF32(distinct ? bf16AsF32(spec) : spec, {2}, {0}, error))
    return nullptr;
  int64_t rank = int64_t(data.rank());
  int64_t axis;
  if (!normAxis(spec, rank, 0, axis, error))
    return nullptr;
  GatherParams p;
  for (int64_t d = 0; d < axis; ++d)
    p.outer *= data.shape[size_t(d)];
  p.axisDim = data.shape[size_t(axis)];
  for (int64_t d = axis + 1; d < rank; ++d)
    p.inner *= data.shape[size_t(d)];
  p.count = idx.numel();
  bool i64 = idx.dtype == DType::I64;
  int64_t n = p.outer * p.count * p.inner;
  if (grad && distinct) {
    int64_t dxBytes = int64_t(data.bytes());
    return lambda(be, spec,
                  [=](cudaStream_t s, const auto &in, const auto &out) {
                    launchGatherGradUnique(p, floatAt(in, 2), in[1].data, i64,
                                           floatAt(out, 0), dxBytes, n, s);
                  });
  }
  if (grad) {
    int64_t dxNumel = data.numel();
    return lambda(
        be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
          launchGatherGrad(p, in[2].template as<float>(), in[1].data, i64,
                           out[0].template as<float>(), dxNumel, n, s);
        });
  }
  size_t elem = dtypeSize(data.dtype);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchGather(p, in[0].data, in[1].data, i64, out[0].data, elem, n, s);
  });
}

namespace {

/// The [outer, axis, inner] rows of a softmax over `axis` of `shape`.
RowParams softmaxRows(const std::vector<int64_t> &shape, int64_t axis) {
  RowParams p;
  int64_t rank = int64_t(shape.size());
  if (axis < 0)
    axis += rank;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? p.outer : d == axis ? p.axis : p.inner) *= shape[size_t(d)];
  return p;
}

} // namespace

/// Softmax/LogSoftmax {axis} and their gradients (dY, Y -> dX).
std::unique_ptr<Kernel> createSoftmax(CudaBackend &be, const OpSpec &spec,
                                      std::string &error) {
  bool grad = spec.opType.find("Grad") != std::string::npos;
  bool logForm = spec.opType.rfind("Log", 0) == 0;
  if (!checkSameShapeF32(bf16AsF32(spec), grad ? 2 : 1, error))
    return nullptr;
  int64_t axis = spec.attrs.getInt("axis", -1);
  int64_t rank = int64_t(spec.outputs[0].rank());
  if (axis < -rank || axis >= rank) {
    error = nodeError(spec, "axis out of range");
    return nullptr;
  }
  RowParams p = softmaxRows(spec.outputs[0].shape, axis);
  if (grad)
    return lambda(
        be, spec,
        [p, logForm](cudaStream_t s, const auto &in, const auto &out) {
          launchSoftmaxGrad(p, floatAt(in, 0), floatAt(in, 1), floatAt(out, 0),
                            logForm, s);
        });
  return lambda(be, spec,
                [p, logForm](cudaStream_t s, const auto &in, const auto &out) {
                  launchSoftmax(p, floatAt(in, 0), floatAt(out, 0), logForm, s);
                });
}

namespace {

/// Rows and columns of a LayerNormalization {axis} of `shape`.
void layerNormRows(const std::vector<int64_t> &shape, int64_t axis,
                   int64_t &rows, int64_t &cols) {
  int64_t rank = int64_t(shape.size());
  if (axis < 0)
    axis += rank;
  rows = cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? rows : cols) *= shape[size_t(d)];
}

} // namespace

std::unique_ptr<Kernel> createLayerNorm(CudaBackend &be, const OpSpec &spec,
                                        std::string &error) {
  // X, Scale, B and Y f32 or bf16; Mean and InvStdDev f32.
  if (!checkSpec(bf16AsF32(spec), 2, 3, 1, 3, {0, 1, 2}, {0}, error) ||
      !checkAllF32(spec, {}, {1, 2}, error))
    return nullptr;
  int64_t rows, cols;
  layerNormRows(spec.inputs[0].shape, spec.attrs.getInt("axis", -1), rows,
                cols);
  if (spec.inputs[1].numel() != cols) {
    error = nodeError(spec, "Scale must have the normalized dimensions' size");
    return nullptr;
  }
  float eps = float(spec.attrs.getFloat("epsilon", 1e-5));
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchLayerNorm(rows, cols, eps, floatAt(in, 0), floatAt(in, 1),
                    floatAt(in, 2), floatAt(out, 0),
                    static_cast<float *>(floatAt(out, 1).p),
                    static_cast<float *>(floatAt(out, 2).p), s);
  });
}

/// dY, X, Scale, Mean, InvStdDev -> dX, dScale[, dB].
std::unique_ptr<Kernel> createLayerNormGrad(CudaBackend &be, const OpSpec &spec,
                                            std::string &error) {
  // dY, X, Scale, dX, dScale, dB f32 or bf16; Mean and InvStdDev f32.
  if (!checkSpec(bf16AsF32(spec), 5, 5, 2, 3, {0, 1, 2}, {0, 1, 2}, error) ||
      !checkAllF32(spec, {3, 4}, {}, error))
    return nullptr;
  int64_t rows, cols;
  layerNormRows(spec.inputs[1].shape, spec.attrs.getInt("axis", -1), rows,
                cols);
  bool wantDx = outputUsed(spec, 0), wantDs = outputUsed(spec, 1),
       wantDb = spec.outputs.size() > 2 && outputUsed(spec, 2);
  return lambda(be, spec, [=](cudaStream_t s, const auto &in, const auto &out) {
    launchLayerNormGrad(rows, cols, floatAt(in, 0), floatAt(in, 1),
                        floatAt(in, 2), in[3].template as<float>(),
                        in[4].template as<float>(),
                        wantDx ? floatAt(out, 0) : FloatPtr{},
                        wantDs ? floatAt(out, 1) : FloatPtr{},
                        wantDb ? floatAt(out, 2) : FloatPtr{}, s);
  });
}

} // namespace oasr::rt::cuda
