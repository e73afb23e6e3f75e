//===- OpGeometry.cpp - Op validation and geometry of every backend -------===//
//
// The checks and derived shapes both kernel backends apply to an OpSpec
// (see OpGeometry.h). Messages are the ones the lit tests expect.
//
//===----------------------------------------------------------------------===//

#include "OpGeometry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>
#include <variant>

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Messages and generic checks
//===----------------------------------------------------------------------===//

Status nodeError(const OpSpec &spec, const std::string &msg) {
  return Status::error("node '" + spec.name + "' (" + spec.opType +
                       "): " + msg);
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

static std::string rangeStr(size_t lo, size_t hi) {
  if (lo == hi)
    return std::to_string(lo);
  return std::to_string(lo) + ".." + std::to_string(hi);
}

Status checkArity(const OpSpec &spec, size_t minIn, size_t maxIn, size_t minOut,
                  size_t maxOut) {
  if (spec.inputs.size() < minIn || spec.inputs.size() > maxIn) {
    return nodeError(spec, "expects " + rangeStr(minIn, maxIn) +
                               " operands, got " +
                               std::to_string(spec.inputs.size()));
  }
  if (spec.outputs.size() < minOut || spec.outputs.size() > maxOut) {
    return nodeError(spec, "expects " + rangeStr(minOut, maxOut) +
                               " results, got " +
                               std::to_string(spec.outputs.size()));
  }
  return Status::success();
}

Status checkDType(const OpSpec &spec, bool isInput, size_t idx, DType t) {
  const auto &descs = isInput ? spec.inputs : spec.outputs;
  if (idx >= descs.size() || descs[idx].dtype == t)
    return Status::success();
  return nodeError(spec, std::string(isInput ? "operand " : "result ") +
                             std::to_string(idx) + " has element type " +
                             dtypeName(descs[idx].dtype) + ", expected " +
                             dtypeName(t));
}

Status checkAllF32(const OpSpec &spec, const std::vector<size_t> &inputs,
                   const std::vector<size_t> &outputs) {
  for (size_t i : inputs)
    OASR_RETURN_IF_ERROR(checkDType(spec, true, i, DType::F32));
  for (size_t i : outputs)
    OASR_RETURN_IF_ERROR(checkDType(spec, false, i, DType::F32));
  return Status::success();
}

Status normAxis(const OpSpec &spec, int64_t rank, int64_t dflt, int64_t &axis) {
  axis = spec.attrs.getInt("axis", dflt);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank) {
    return nodeError(spec,
                     "axis " + std::to_string(spec.attrs.getInt("axis", dflt)) +
                         " out of range for rank " + std::to_string(rank));
  }
  return Status::success();
}

Status checkSpec(const OpSpec &spec, size_t minIn, size_t maxIn, size_t minOut,
                 size_t maxOut, const std::vector<size_t> &f32In,
                 const std::vector<size_t> &f32Out) {
  OASR_RETURN_IF_ERROR(checkArity(spec, minIn, maxIn, minOut, maxOut));
  return checkAllF32(spec, f32In, f32Out);
}

Status checkSameShapes(const OpSpec &spec, size_t count) {
  for (size_t i = 0; i < count && i < spec.inputs.size(); ++i)
    if (spec.inputs[i].shape != spec.outputs[0].shape) {
      return nodeError(spec, "operands and result must have one shape");
    }
  return Status::success();
}

Status checkSameShapeF32(const OpSpec &spec, size_t arity) {
  std::vector<size_t> all(arity);
  for (size_t i = 0; i < arity; ++i)
    all[i] = i;
  OASR_RETURN_IF_ERROR(checkSpec(spec, arity, arity, 1, 1, all, {0}));
  return checkSameShapes(spec, arity);
}

//===----------------------------------------------------------------------===//
// Shapes and broadcasting
//===----------------------------------------------------------------------===//

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

std::vector<int64_t> spatialDims(const std::vector<int64_t> &shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

bool broadcastsTo(const std::vector<int64_t> &in,
                  const std::vector<int64_t> &out) {
  if (in.size() > out.size())
    return false;
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != 1 && in[i] != out[off + i])
      return false;
  return true;
}

Status checkBroadcastOperands(const OpSpec &spec) {
  const TensorDesc &y = spec.outputs[0];
  if (!isFloatOrInt(y.dtype)) {
    return nodeError(spec, std::string("element type ") + dtypeName(y.dtype) +
                               " is not supported");
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    OASR_RETURN_IF_ERROR(checkDType(spec, true, i, y.dtype));
    if (!broadcastsTo(spec.inputs[i].shape, y.shape)) {
      return nodeError(spec, "operand " + std::to_string(i) + " of shape " +
                                 shapeStr(spec.inputs[i].shape) +
                                 " does not broadcast to " + shapeStr(y.shape));
    }
  }
  return Status::success();
}

Status checkCopyShapes(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, spec.inputs[0].dtype));
  if (spec.inputs[0].numel() != spec.outputs[0].numel()) {
    return nodeError(
        spec, "operand " + shapeStr(spec.inputs[0].shape) + " and result " +
                  shapeStr(spec.outputs[0].shape) + " differ in size");
  }
  return Status::success();
}

Status reduceGeom(const OpSpec &spec, std::vector<int64_t> &kept,
                  float &scale) {
  const auto &xs = spec.inputs[0].shape;
  int64_t r = int64_t(xs.size());
  bool keep = spec.attrs.getInt("keepdims", 1) != 0;
  kept = xs;
  // The axes: an attribute, or an operand the program holds as a constant.
  std::optional<std::vector<int64_t>> axes;
  if (spec.attrs.has("axes"))
    axes = spec.attrs.getInts("axes");
  else if (spec.inputs.size() > 1 && spec.inputValues.size() > 1 &&
           !spec.inputValues[1].empty() && spec.inputs[1].dtype == DType::I64) {
    const std::vector<char> &raw = spec.inputValues[1];
    axes.emplace(raw.size() / sizeof(int64_t));
    std::memcpy(axes->data(), raw.data(), axes->size() * sizeof(int64_t));
  }
  if (axes && !axes->empty()) {
    for (int64_t a : *axes) {
      if (a < 0)
        a += r;
      if (a < 0 || a >= r) {
        return nodeError(spec, "axis out of range");
      }
      kept[a] = 1;
    }
  } else if (keep && spec.inputs.size() > 1 && !axes) {
    kept = spec.outputs[0].shape;
  } else if (spec.inputs.size() > 1 && !axes) {
    return nodeError(spec, "axes as an operand that is not a constant need "
                           "keepdims = 1");
  } else if (spec.attrs.getInt("noop_with_empty_axes", 0) == 0) {
    kept.assign(xs.size(), 1);
  }
  int64_t keptNumel = 1;
  for (int64_t d : kept)
    keptNumel *= d;
  if (kept.size() != xs.size() || keptNumel != spec.outputs[0].numel() ||
      (keep && kept != spec.outputs[0].shape)) {
    return nodeError(spec, "result " + shapeStr(spec.outputs[0].shape) +
                               " does not match the reduction of " +
                               shapeStr(xs));
  }
  scale = 1.0f;
  if (spec.opType == "ReduceMean")
    scale = float(double(keptNumel) / double(spec.inputs[0].numel()));
  return Status::success();
}

Status constantBytes(const OpSpec &spec, std::vector<char> &bytes) {
  const TensorDesc &y = spec.outputs[0];
  std::vector<double> vals;
  const AttrValue *v = nullptr;
  for (const char *name :
       {"value", "value_float", "value_floats", "value_int", "value_ints"}) {
    auto it = spec.attrs.all().find(name);
    if (it != spec.attrs.all().end()) {
      v = &it->second;
      break;
    }
  }
  if (v) {
    if (auto *d = std::get_if<double>(v))
      vals = {*d};
    else if (auto *i = std::get_if<int64_t>(v))
      vals = {double(*i)};
    else if (auto *ds = std::get_if<std::vector<double>>(v))
      vals = *ds;
    else if (auto *is = std::get_if<std::vector<int64_t>>(v))
      vals.assign(is->begin(), is->end());
  }
  int64_t n = y.numel();
  if (vals.empty() || (int64_t(vals.size()) != n && vals.size() != 1)) {
    return nodeError(spec, "needs a 'value' attribute with 1 or " +
                               std::to_string(n) +
                               " numbers (the executor materializes tensor "
                               "constants itself)");
  }
  bytes.assign(y.bytes(), 0);
  for (int64_t i = 0; i < n; ++i) {
    double d = vals.size() == 1 ? vals[0] : vals[i];
    switch (y.dtype) {
    case DType::F32:
      reinterpret_cast<float *>(bytes.data())[i] = float(d);
      break;
    case DType::I64:
      reinterpret_cast<int64_t *>(bytes.data())[i] = int64_t(d);
      break;
    case DType::I32:
      reinterpret_cast<int32_t *>(bytes.data())[i] = int32_t(d);
      break;
    case DType::Bool:
      reinterpret_cast<uint8_t *>(bytes.data())[i] = d != 0;
      break;
    default:
      return nodeError(spec, std::string("element type ") + dtypeName(y.dtype) +
                                 " is not supported");
    }
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Windows: convolutions and pooling
//===----------------------------------------------------------------------===//

Status resolveWindow(const OpSpec &spec, const std::vector<int64_t> &in,
                     const std::vector<int64_t> &kernel,
                     const std::vector<int64_t> &out, bool allowCeil,
                     Window &w) {
  size_t sp = in.size();
  auto listAttr = [&](const char *name, int64_t dflt, size_t n,
                      std::vector<int64_t> &v) {
    v = spec.attrs.getInts(name, std::vector<int64_t>(n, dflt));
    if (v.size() != n) {
      return nodeError(spec, std::string("attribute '") + name + "' has " +
                                 std::to_string(v.size()) +
                                 " values, expected " + std::to_string(n));
    }
    return Status::success();
  };
  std::vector<int64_t> strides, dil, pads;
  OASR_RETURN_IF_ERROR(listAttr("strides", 1, sp, strides));
  OASR_RETURN_IF_ERROR(listAttr("dilations", 1, sp, dil));
  if (spec.attrs.has("kernel_shape") &&
      spec.attrs.getInts("kernel_shape") != kernel) {
    return nodeError(spec, "kernel_shape " +
                               shapeStr(spec.attrs.getInts("kernel_shape")) +
                               " does not match the weights' spatial shape " +
                               shapeStr(kernel));
  }
  std::string autoPad = spec.attrs.getString("auto_pad", "NOTSET");
  pads.assign(2 * sp, 0);
  if (autoPad == "NOTSET") {
    OASR_RETURN_IF_ERROR(listAttr("pads", 0, 2 * sp, pads));
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < sp; ++i) {
      int64_t o = (in[i] + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>(
          0, (o - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in[i]);
      int64_t small = total / 2;
      pads[i] = autoPad == "SAME_UPPER" ? small : total - small;
      pads[i + sp] = total - pads[i];
    }
  } else if (autoPad != "VALID") {
    return nodeError(spec, "auto_pad '" + autoPad + "' is not supported");
  }
  w = Window();
  for (size_t i = 0; i < sp; ++i) {
    if (strides[i] < 1 || dil[i] < 1 || kernel[i] < 1) {
      return nodeError(spec, "strides, dilations and kernel must be >= 1");
    }
    int64_t extent = (kernel[i] - 1) * dil[i] + 1;
    int64_t pl = pads[i], pr = pads[i + sp];
    int64_t floorOut = (in[i] + pl + pr - extent) / strides[i] + 1;
    if (out[i] != floorOut) {
      int64_t ceilOut =
          (in[i] + pl + pr - extent + strides[i] - 1) / strides[i] + 1;
      if (!allowCeil || out[i] != ceilOut) {
        return nodeError(
            spec,
            "result spatial size " + std::to_string(out[i]) + " in dimension " +
                std::to_string(i) + " does not match the window (input " +
                std::to_string(in[i]) + ", extent " + std::to_string(extent) +
                ", stride " + std::to_string(strides[i]) + ", pads " +
                std::to_string(pl) + "/" + std::to_string(pr) + " give " +
                std::to_string(floorOut) + ")");
      }
      pr = (out[i] - 1) * strides[i] + extent - in[i] - pl;
      w.paddedForCeil = true;
    }
    w.kernel.push_back(kernel[i]);
    w.strides.push_back(strides[i]);
    w.dilations.push_back(dil[i] - 1);
    w.padL.push_back(pl);
    w.padR.push_back(pr);
  }
  return Status::success();
}

Status convWindow(const OpSpec &spec, const TensorDesc &x, const TensorDesc &w,
                  const TensorDesc &y, int64_t &group, Window &win) {
  if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank() ||
      y.rank() != x.rank()) {
    return nodeError(spec, "expects 1-D to 3-D convolution tensors, got X " +
                               shapeStr(x.shape) + ", W " + shapeStr(w.shape) +
                               ", Y " + shapeStr(y.shape));
  }
  group = spec.attrs.getInt("group", 1);
  int64_t n = x.shape[0], c = x.shape[1], m = w.shape[0];
  if (group < 1 || c != w.shape[1] * group || m % group != 0 ||
      y.shape[0] != n || y.shape[1] != m) {
    return nodeError(spec, "inconsistent channels: X " + shapeStr(x.shape) +
                               ", W " + shapeStr(w.shape) + ", Y " +
                               shapeStr(y.shape) + ", group " +
                               std::to_string(group));
  }
  return resolveWindow(spec, spatialDims(x.shape), spatialDims(w.shape),
                       spatialDims(y.shape), /*allowCeil=*/false, win);
}

Status poolKernelShape(const OpSpec &spec, size_t spatialRank,
                       std::vector<int64_t> &kernel) {
  if (!spec.attrs.has("kernel_shape")) {
    return nodeError(spec, "attribute 'kernel_shape' is required");
  }
  kernel = spec.attrs.getInts("kernel_shape");
  if (kernel.size() != spatialRank) {
    return nodeError(spec, "kernel_shape has the wrong rank");
  }
  return Status::success();
}

Status checkAvgPoolDilations(const OpSpec &spec) {
  for (int64_t d : spec.attrs.getInts("dilations"))
    if (d != 1) {
      return nodeError(spec, "dilated average pooling is not supported");
    }
  return Status::success();
}

Status checkAvgPoolCeil(const OpSpec &spec, bool paddedForCeil) {
  if (spec.attrs.getInt("count_include_pad", 0) != 0 && paddedForCeil) {
    return nodeError(spec, "ceil_mode with count_include_pad = 1 is not "
                           "supported");
  }
  return Status::success();
}

Status pool2DGeom(const OpSpec &spec, const TensorDesc &x, const TensorDesc &y,
                  Pool2D &g) {
  if ((x.rank() != 3 && x.rank() != 4) || y.rank() != x.rank() ||
      x.shape[0] != y.shape[0] || x.shape[1] != y.shape[1]) {
    return nodeError(spec, "expects 1-D or 2-D pooling tensors, got " +
                               shapeStr(x.shape) + " -> " + shapeStr(y.shape));
  }
  if (spec.attrs.getInt("storage_order", 0) != 0) {
    return nodeError(spec, "storage_order = 1 is not supported");
  }
  std::vector<int64_t> k;
  std::vector<int64_t> in = spatialDims(x.shape), out = spatialDims(y.shape);
  OASR_RETURN_IF_ERROR(poolKernelShape(spec, in.size(), k));
  Window w;
  OASR_RETURN_IF_ERROR(resolveWindow(
      spec, in, k, out, spec.attrs.getInt("ceil_mode", 0) != 0, w));
  bool twoD = in.size() == 2;
  g.planes = x.shape[0] * x.shape[1];
  g.ih = twoD ? in[0] : 1;
  g.iw = in.back();
  g.oh = twoD ? out[0] : 1;
  g.ow = out.back();
  g.kh = twoD ? w.kernel[0] : 1;
  g.kw = w.kernel.back();
  g.sh = twoD ? w.strides[0] : 1;
  g.sw = w.strides.back();
  g.dh = twoD ? w.dilations[0] + 1 : 1;
  g.dw = w.dilations.back() + 1;
  g.ph = twoD ? w.padL[0] : 0;
  g.pw = w.padL.back();
  g.countIncludePad = spec.attrs.getInt("count_include_pad", 0) != 0;
  g.paddedForCeil = w.paddedForCeil;
  return Status::success();
}

Status maxPoolGradGeom(const OpSpec &spec, int64_t &planes, int64_t &inPlane,
                       int64_t &outPlane) {
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, DType::I64));
  const TensorDesc &dy = spec.inputs[0], &dx = spec.outputs[0];
  if (dy.rank() < 3 || dx.rank() != dy.rank() || dy.shape[0] != dx.shape[0] ||
      dy.shape[1] != dx.shape[1] || spec.inputs[1].shape != dy.shape) {
    return nodeError(spec, "expects dY and Indices [N, C, ...] and dX [N, "
                           "C, ...]");
  }
  planes = dx.shape[0] * dx.shape[1];
  inPlane = dx.numel() / planes;
  outPlane = dy.numel() / planes;
  return Status::success();
}

Status globalPoolGeom(const OpSpec &spec, bool grad, size_t maxRank,
                      int64_t &planes, int64_t &size) {
  const TensorDesc &x = grad ? spec.outputs[0] : spec.inputs[0];
  const TensorDesc &y = grad ? spec.inputs[0] : spec.outputs[0];
  if (x.rank() < 3 || x.rank() > maxRank ||
      y.numel() != x.shape[0] * x.shape[1] || y.rank() != x.rank()) {
    return nodeError(spec, "expects X [N, C, ...] and Y [N, C, 1, ...], got " +
                               shapeStr(x.shape) + " and " + shapeStr(y.shape));
  }
  planes = x.shape[0] * x.shape[1];
  size = x.numel() / planes;
  return Status::success();
}

Status padGradBegin(const OpSpec &spec, size_t maxRank,
                    std::vector<int64_t> &begin) {
  const auto &dy = spec.inputs[0].shape, &dx = spec.outputs[0].shape;
  std::vector<int64_t> pads = spec.attrs.getInts("pads");
  size_t r = dx.size();
  bool ok = dy.size() == r && pads.size() == 2 * r && r <= maxRank;
  for (size_t d = 0; ok && d < r; ++d)
    ok = dx[d] + pads[d] + pads[d + r] == dy[d];
  if (!ok) {
    return nodeError(spec, "pads " + shapeStr(pads) + " do not take " +
                               shapeStr(dx) + " to " + shapeStr(dy));
  }
  begin.assign(r, 0);
  for (size_t d = 0; d < r; ++d)
    begin[d] = -pads[d];
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Gemm, softmax cross-entropy
//===----------------------------------------------------------------------===//

Status gemmShape(const OpSpec &spec, const TensorDesc &a, const TensorDesc &b,
                 const TensorDesc &y, GemmShape &g) {
  g.ta = spec.attrs.getInt("transA", 0) != 0;
  g.tb = spec.attrs.getInt("transB", 0) != 0;
  g.alpha = float(spec.attrs.getFloat("alpha", 1.0));
  g.beta = float(spec.attrs.getFloat("beta", 1.0));
  if (a.rank() != 2 || b.rank() != 2 || y.rank() != 2) {
    return nodeError(spec, "expects 2-D A, B and Y");
  }
  g.m = g.ta ? a.shape[1] : a.shape[0];
  g.k = g.ta ? a.shape[0] : a.shape[1];
  int64_t kb = g.tb ? b.shape[1] : b.shape[0];
  g.n = g.tb ? b.shape[0] : b.shape[1];
  if (kb != g.k || y.shape[0] != g.m || y.shape[1] != g.n) {
    return nodeError(spec, "shapes do not multiply: A " + shapeStr(a.shape) +
                               ", B " + shapeStr(b.shape) + ", Y " +
                               shapeStr(y.shape) + " (transA " +
                               std::to_string(g.ta) + ", transB " +
                               std::to_string(g.tb) + ")");
  }
  return Status::success();
}

Status gemmGradShape(const OpSpec &spec, GemmShape &g) {
  OASR_RETURN_IF_ERROR(
      gemmShape(spec, spec.inputs[1], spec.inputs[2], spec.inputs[0], g));
  if (spec.outputs[0].shape != spec.inputs[1].shape ||
      spec.outputs[1].shape != spec.inputs[2].shape) {
    return nodeError(spec, "dA and dB must have A's and B's shapes");
  }
  return Status::success();
}

Status gemmBiasError(const OpSpec &spec, const TensorDesc &c, int64_t m,
                     int64_t n) {
  return nodeError(spec, "C of shape " + shapeStr(c.shape) +
                             " does not broadcast to [" + std::to_string(m) +
                             ", " + std::to_string(n) + "]");
}

Status matMulShapes(const OpSpec &spec, std::vector<int64_t> &ad,
                    std::vector<int64_t> &bd, std::vector<int64_t> &yd) {
  ad = spec.inputs[0].shape;
  bd = spec.inputs[1].shape;
  if (ad.empty() || bd.empty()) {
    return nodeError(spec, "operands must have rank >= 1");
  }
  if (ad.size() == 1)
    ad.insert(ad.begin(), 1);
  if (bd.size() == 1)
    bd.push_back(1);
  size_t r = std::max(ad.size(), bd.size());
  ad.insert(ad.begin(), r - ad.size(), 1);
  bd.insert(bd.begin(), r - bd.size(), 1);
  yd.assign(r, 0);
  for (size_t i = 0; i + 2 < r; ++i) {
    if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1) {
      return nodeError(spec, "batch dimensions do not broadcast: " +
                                 shapeStr(spec.inputs[0].shape) + " x " +
                                 shapeStr(spec.inputs[1].shape));
    }
    yd[i] = std::max(ad[i], bd[i]);
  }
  yd[r - 2] = ad[r - 2];
  yd[r - 1] = bd[r - 1];
  int64_t numel = 1;
  for (int64_t d : yd)
    numel *= d;
  if (ad[r - 1] != bd[r - 2] || spec.outputs[0].numel() != numel) {
    return nodeError(
        spec, "shapes do not multiply: " + shapeStr(spec.inputs[0].shape) +
                  " x " + shapeStr(spec.inputs[1].shape) + " -> " +
                  shapeStr(spec.outputs[0].shape));
  }
  return Status::success();
}

std::optional<BinOp> binaryOpOf(const OpSpec &spec) {
  std::optional<BinOp> op = opNamed(kBinOps, spec.opType);
  if (op == BinOp::Mod && spec.attrs.getInt("fmod", 0) != 0)
    return BinOp::Fmod;
  return op;
}

std::pair<float, float> activationParams(const OpSpec &spec, UnaryOp op) {
  double alpha = kEluAlpha, second = kHardSigmoidBeta;
  const char *secondName = "beta";
  switch (op) {
  case UnaryOp::LeakyRelu:
    alpha = kLeakyReluAlpha;
    break;
  case UnaryOp::HardSigmoid:
    alpha = kHardSigmoidAlpha;
    break;
  case UnaryOp::Selu:
    alpha = kSeluAlpha;
    second = kSeluGamma;
    secondName = "gamma";
    break;
  case UnaryOp::Celu:
    alpha = kCeluAlpha;
    break;
  case UnaryOp::ThresholdedRelu:
    alpha = kThresholdedReluAlpha;
    break;
  default:
    break;
  }
  return {float(spec.attrs.getFloat("alpha", alpha)),
          float(spec.attrs.getFloat(secondName, second))};
}

Status sceGeom(const OpSpec &spec, bool grad, SceGeom &g) {
  const TensorDesc &scores = spec.inputs[grad ? 1 : 0];
  const TensorDesc &labels = spec.inputs[grad ? 2 : 1];
  if (scores.rank() < 2 || labels.rank() != scores.rank() - 1 ||
      labels.shape[0] != scores.shape[0] ||
      !std::equal(labels.shape.begin() + 1, labels.shape.end(),
                  scores.shape.begin() + 2)) {
    return nodeError(spec, "expects scores [N, C, ...] and labels [N, ...], "
                           "got " +
                               shapeStr(scores.shape) + " and " +
                               shapeStr(labels.shape));
  }
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32) {
    return nodeError(spec, "labels must be i64 or i32");
  }
  std::string red = spec.attrs.getString("reduction", "mean");
  if (red == "mean")
    g.reduction = SceReduction::Mean;
  else if (red == "sum")
    g.reduction = SceReduction::Sum;
  else if (red == "none")
    g.reduction = SceReduction::None;
  else {
    return nodeError(spec, "reduction '" + red + "' is not supported");
  }
  g.n = scores.shape[0];
  g.c = scores.shape[1];
  g.d = scores.numel() / std::max<int64_t>(1, g.n * g.c);
  g.hasIgnore = spec.attrs.has("ignore_index");
  g.ignoreIndex = spec.attrs.getInt("ignore_index", -100);
  g.labels64 = labels.dtype == DType::I64;
  double smoothing = spec.attrs.getFloat("label_smoothing", 0);
  if (!(smoothing >= 0 && smoothing < 1))
    return nodeError(spec, "label_smoothing " + std::to_string(smoothing) +
                               " is outside [0, 1)");
  g.labelSmoothing = float(smoothing);
  int64_t want = g.reduction == SceReduction::None ? g.n * g.d : 1;
  if (!grad && (spec.outputs[0].numel() != want ||
                (spec.outputs.size() > 1 &&
                 spec.outputs[1].shape != spec.inputs[0].shape))) {
    return nodeError(spec, "loss must have " + std::to_string(want) +
                               " element(s) and log_prob the scores' shape");
  }
  if (grad && (spec.inputs[0].numel() != want ||
               spec.outputs[0].shape != spec.inputs[1].shape)) {
    return nodeError(spec, "dLoss must have " + std::to_string(want) +
                               " element(s) and dScores log_prob's shape");
  }
  return Status::success();
}

Status elementsGeom(const OpSpec &spec, ElementsGeom &g) {
  const bool scatter = spec.opType == "ScatterElements";
  OASR_RETURN_IF_ERROR(
      checkArity(spec, scatter ? 3 : 2, scatter ? 3 : 2, 1, 1));
  const TensorDesc &data = spec.inputs[0], &idx = spec.inputs[1];
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    return nodeError(spec, "indices must be i64 or i32");
  if (data.rank() == 0 || data.rank() > 8 || idx.rank() != data.rank())
    return nodeError(spec, "indices must have the data's rank (1 to 8), got " +
                               shapeStr(idx.shape) + " for " +
                               shapeStr(data.shape));
  int64_t axis;
  OASR_RETURN_IF_ERROR(normAxis(spec, int64_t(data.rank()), 0, axis));
  for (size_t d = 0; d < data.rank(); ++d)
    if (int64_t(d) != axis && idx.shape[d] > data.shape[d])
      return nodeError(spec, "indices " + shapeStr(idx.shape) +
                                 " exceed the data " + shapeStr(data.shape) +
                                 " outside the axis");
  const TensorDesc &y = spec.outputs[0];
  if (y.dtype != data.dtype || y.shape != (scatter ? data.shape : idx.shape))
    return nodeError(spec, "result " + shapeStr(y.shape) + " should be " +
                               shapeStr(scatter ? data.shape : idx.shape));
  if (scatter &&
      (spec.inputs[2].shape != idx.shape || spec.inputs[2].dtype != data.dtype))
    return nodeError(spec, "updates must have the indices' shape and the "
                           "data's element type");
  std::string red = spec.attrs.getString("reduction", "none");
  if (red != "none" && red != "add")
    return nodeError(spec, "reduction '" + red + "' is not supported");
  g.add = red == "add";
  if (g.add && data.dtype != DType::F32)
    return nodeError(spec, "reduction 'add' runs on f32 data");
  g.rank = int(data.rank());
  g.axis = int(axis);
  g.axisDim = data.shape[size_t(axis)];
  g.count = idx.numel();
  g.i64 = idx.dtype == DType::I64;
  std::vector<int64_t> strides = rowMajorStrides(data.shape);
  for (int d = 0; d < g.rank; ++d) {
    g.idxDims[d] = idx.shape[size_t(d)];
    g.dataStrides[d] = strides[size_t(d)];
  }
  // Indices the program holds as a constant are checked now.
  if (spec.inputValues.size() > 1 && spec.inputValues[1].size() == idx.bytes())
    for (int64_t i = 0; i < g.count; ++i) {
      int64_t v;
      if (g.i64) {
        std::memcpy(&v, spec.inputValues[1].data() + i * 8, 8);
      } else {
        int32_t w;
        std::memcpy(&w, spec.inputValues[1].data() + i * 4, 4);
        v = w;
      }
      if (v < -g.axisDim || v >= g.axisDim)
        return nodeError(spec, "index " + std::to_string(v) + " at " +
                                   std::to_string(i) + " is outside [" +
                                   std::to_string(-g.axisDim) + ", " +
                                   std::to_string(g.axisDim) + ")");
    }
  return Status::success();
}

/// X viewed as [outer, n, inner] around `axis` (checked against X's rank).
static Status splitAtAxis(const OpSpec &spec, const std::vector<int64_t> &x,
                          int64_t axis, int64_t &outer, int64_t &n,
                          int64_t &inner) {
  int64_t r = int64_t(x.size());
  if (axis < -r || axis >= r)
    return nodeError(spec, "axis " + std::to_string(axis) + " is outside [" +
                               std::to_string(-r) + ", " + std::to_string(r) +
                               ")");
  if (axis < 0)
    axis += r;
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x[size_t(d)];
  n = x[size_t(axis)];
  for (int64_t d = axis + 1; d < r; ++d)
    inner *= x[size_t(d)];
  return Status::success();
}

Status cumSumGeom(const OpSpec &spec, CumSumGeom &g) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  const TensorDesc &x = spec.inputs[0];
  if (spec.outputs[0].shape != x.shape || spec.outputs[0].dtype != x.dtype ||
      (x.dtype != DType::F32 && x.dtype != DType::I64))
    return nodeError(spec, "expects X and Y of one shape, f32 or i64");
  const TensorDesc &a = spec.inputs[1];
  if (a.numel() != 1 || spec.inputValues.size() < 2 ||
      spec.inputValues[1].size() != a.bytes() ||
      (a.dtype != DType::I64 && a.dtype != DType::I32))
    return nodeError(spec, "the axis must be an integer constant");
  int64_t axis;
  if (a.dtype == DType::I64) {
    std::memcpy(&axis, spec.inputValues[1].data(), 8);
  } else {
    int32_t w;
    std::memcpy(&w, spec.inputValues[1].data(), 4);
    axis = w;
  }
  OASR_RETURN_IF_ERROR(splitAtAxis(spec, x.shape, axis, g.outer, g.n, g.inner));
  g.exclusive = spec.attrs.getInt("exclusive", 0) != 0;
  g.reverse = spec.attrs.getInt("reverse", 0) != 0;
  return Status::success();
}

/// The tuples of GatherND/ScatterND: data and indices of shapes `data` and
/// `idx`, `b` batch dimensions; `slices` is the shape of what the tuples
/// name, indices.shape[:-1] + data.shape[b + k:].
static Status ndGeom(const OpSpec &spec, const std::vector<int64_t> &data,
                     const std::vector<int64_t> &idx, ScatterNDGeom &g,
                     std::vector<int64_t> &slices) {
  const int64_t b = spec.attrs.getInt("batch_dims", 0);
  const int64_t r = int64_t(data.size()), q = int64_t(idx.size());
  if (q < 1 || b < 0 || b >= std::min(r, q))
    return nodeError(spec, "batch_dims " + std::to_string(b) +
                               " must be below the ranks of data " +
                               shapeStr(data) + " and indices " +
                               shapeStr(idx));
  g.k = idx.back();
  if (g.k < 1 || g.k > r - b || g.k > 8) {
    return nodeError(spec, "the indices' last dimension (" +
                               std::to_string(g.k) + ") must be in [1, " +
                               std::to_string(std::min<int64_t>(r - b, 8)) +
                               "]");
  }
  for (int64_t d = 0; d < b; ++d)
    if (data[size_t(d)] != idx[size_t(d)])
      return nodeError(spec, "data " + shapeStr(data) + " and indices " +
                                 shapeStr(idx) + " differ in batch dimension " +
                                 std::to_string(d));
  slices.assign(idx.begin(), idx.end() - 1);
  slices.insert(slices.end(), data.begin() + b + g.k, data.end());
  g.batchDims = b;
  g.count = 1;
  for (int64_t i = 0; i + 1 < q; ++i)
    g.count *= idx[size_t(i)];
  int64_t batches = 1;
  for (int64_t i = 0; i < b; ++i)
    batches *= idx[size_t(i)];
  g.perBatch = batches > 0 ? std::max<int64_t>(g.count / batches, 1) : 1;
  g.slice = 1;
  for (int64_t i = b + g.k; i < r; ++i)
    g.slice *= data[size_t(i)];
  int64_t stride = g.slice;
  for (int64_t d = g.k - 1; d >= 0; --d) {
    g.dims[d] = data[size_t(b + d)];
    g.strides[d] = stride;
    stride *= data[size_t(b + d)];
  }
  g.batchStride = b > 0 ? stride : 0;
  return Status::success();
}

Status gatherNDGeom(const OpSpec &spec, ScatterNDGeom &g) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, DType::I64));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, spec.inputs[0].dtype));
  std::vector<int64_t> want;
  OASR_RETURN_IF_ERROR(
      ndGeom(spec, spec.inputs[0].shape, spec.inputs[1].shape, g, want));
  if (spec.outputs[0].shape != want)
    return nodeError(spec, "result " + shapeStr(spec.outputs[0].shape) +
                               "; indices " + shapeStr(spec.inputs[1].shape) +
                               " and data " + shapeStr(spec.inputs[0].shape) +
                               " give " + shapeStr(want));
  return Status::success();
}

Status argGeom(const OpSpec &spec, ArgGeom &g) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, DType::F32));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, DType::I64));
  const TensorDesc &x = spec.inputs[0];
  OASR_RETURN_IF_ERROR(splitAtAxis(spec, x.shape, spec.attrs.getInt("axis", 0),
                                   g.outer, g.n, g.inner));
  if (spec.outputs[0].numel() != g.outer * g.inner || g.n < 1)
    return nodeError(spec, "result " + shapeStr(spec.outputs[0].shape) +
                               " is not X " + shapeStr(x.shape) +
                               " without its axis");
  g.max = spec.opType == "ArgMax";
  g.last = spec.attrs.getInt("select_last_index", 0) != 0;
  return Status::success();
}

Status topKGeom(const OpSpec &spec, TopKGeom &g) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 2, 2, 2, 2));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, DType::F32));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, DType::F32));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 1, DType::I64));
  const TensorDesc &x = spec.inputs[0];
  int64_t axis = spec.attrs.getInt("axis", -1);
  OASR_RETURN_IF_ERROR(splitAtAxis(spec, x.shape, axis, g.outer, g.n, g.inner));
  std::vector<int64_t> ys = x.shape;
  size_t a = size_t(axis < 0 ? axis + int64_t(x.rank()) : axis);
  g.k = spec.outputs[0].rank() == x.rank() ? spec.outputs[0].shape[a] : -1;
  if (g.k < 0 || g.k > g.n)
    return nodeError(spec, "k " + std::to_string(g.k) +
                               " is larger than the axis (" +
                               std::to_string(g.n) + ")");
  ys[a] = g.k;
  for (size_t i = 0; i < 2; ++i)
    if (spec.outputs[i].shape != ys)
      return nodeError(spec, "result " + std::to_string(i) + " is " +
                                 shapeStr(spec.outputs[i].shape) +
                                 ", expected " + shapeStr(ys));
  g.largest = spec.attrs.getInt("largest", 1) != 0;
  return Status::success();
}

Status oneHotGeom(const OpSpec &spec, OneHotGeom &g) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1, 1));
  const TensorDesc &idx = spec.inputs[0], &values = spec.inputs[2];
  g.indexType = idx.dtype;
  if (g.indexType != DType::I64 && g.indexType != DType::I32 &&
      g.indexType != DType::F32)
    return nodeError(spec, std::string("indices of type ") +
                               dtypeName(idx.dtype) +
                               ", expected i64, i32 or f32");
  if (values.numel() != 2)
    return nodeError(spec, "values must hold two elements [off, on], not " +
                               shapeStr(values.shape));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, values.dtype));
  const std::vector<int64_t> &ys = spec.outputs[0].shape;
  int64_t r = int64_t(ys.size()), axis = spec.attrs.getInt("axis", -1);
  if (r != int64_t(idx.rank()) + 1)
    return nodeError(spec, "result " + shapeStr(ys) + " must have one more " +
                               "dimension than the indices " +
                               shapeStr(idx.shape));
  OASR_RETURN_IF_ERROR(splitAtAxis(spec, ys, axis, g.outer, g.depth, g.inner));
  return Status::success();
}

Status scatterNDGeom(const OpSpec &spec, ScatterNDGeom &g) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, DType::I64));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 2, spec.inputs[0].dtype));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, spec.inputs[0].dtype));
  const auto &data = spec.inputs[0].shape, &idx = spec.inputs[1].shape,
             &upd = spec.inputs[2].shape;
  if (spec.outputs[0].shape != data || idx.empty()) {
    return nodeError(spec, "expects indices of rank >= 1 and a result of the "
                           "data's shape");
  }
  std::vector<int64_t> want;
  OASR_RETURN_IF_ERROR(ndGeom(spec, data, idx, g, want));
  if (upd != want) {
    return nodeError(spec, "updates have shape " + shapeStr(upd) +
                               "; indices " + shapeStr(idx) + " and data " +
                               shapeStr(data) + " need " + shapeStr(want));
  }
  std::string r = spec.attrs.getString("reduction", "none");
  if (r == "none")
    g.reduction = ScatterReduction::None;
  else if (r == "add")
    g.reduction = ScatterReduction::Add;
  else if (r == "mul")
    g.reduction = ScatterReduction::Mul;
  else if (r == "max")
    g.reduction = ScatterReduction::Max;
  else if (r == "min")
    g.reduction = ScatterReduction::Min;
  else {
    return nodeError(spec, "unknown reduction '" + r + "'");
  }
  if (g.reduction != ScatterReduction::None &&
      spec.inputs[0].dtype != DType::F32) {
    return nodeError(spec, "reduction '" + r + "' needs f32 data");
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Gelu, Dropout, Slice
//===----------------------------------------------------------------------===//

Status geluIsTanh(const OpSpec &spec, bool &tanh) {
  std::string approx = spec.attrs.getString("approximate", "none");
  if (approx != "none" && approx != "tanh") {
    return nodeError(spec, "approximate '" + approx + "' is not supported");
  }
  tanh = approx == "tanh";
  return Status::success();
}

Status attentionGeom(const OpSpec &spec, bool grad, AttentionGeom &g) {
  size_t first = grad ? 1 : 0;
  OASR_RETURN_IF_ERROR(
      checkArity(spec, first + 3, first + 4, grad ? 3 : 1, grad ? 3 : 1));
  const TensorDesc &q = spec.inputs[first], &kt = spec.inputs[first + 1],
                   &v = spec.inputs[first + 2];
  size_t r = q.rank();
  if (r < 2 || kt.rank() != r || v.rank() != r)
    return nodeError(spec, "Q " + shapeStr(q.shape) + ", KT " +
                               shapeStr(kt.shape) + " and V " +
                               shapeStr(v.shape) +
                               " must be of one rank, at least 2");
  g.m = q.shape[r - 2];
  g.d = q.shape[r - 1];
  g.n = kt.shape[r - 1];
  g.e = v.shape[r - 1];
  g.batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) {
    if (kt.shape[i] != q.shape[i] || v.shape[i] != q.shape[i])
      return nodeError(spec, "Q " + shapeStr(q.shape) + ", KT " +
                                 shapeStr(kt.shape) + " and V " +
                                 shapeStr(v.shape) +
                                 " do not share one batch shape");
    g.batch *= q.shape[i];
  }
  if (kt.shape[r - 2] != g.d || v.shape[r - 2] != g.n)
    return nodeError(spec,
                     "Q " + shapeStr(q.shape) + ", KT " + shapeStr(kt.shape) +
                         " and V " + shapeStr(v.shape) +
                         " are not [..., M, D], [..., D, N], [..., N, E]");
  g.dtype = q.dtype;
  if (g.dtype != DType::F32 && g.dtype != DType::BF16)
    return nodeError(spec, std::string("Q has element type ") +
                               dtypeName(g.dtype) + ", expected f32 or bf16");
  std::vector<int64_t> yShape = q.shape;
  yShape.back() = g.e;
  std::vector<const TensorDesc *> floats = {&q, &kt, &v};
  if (grad) {
    floats.push_back(&spec.inputs[0]);
    for (size_t i = 0; i < 3; ++i) {
      floats.push_back(&spec.outputs[i]);
      if (spec.outputs[i].shape != spec.inputs[first + i].shape)
        return nodeError(spec, "result " + std::to_string(i) + " is " +
                                   shapeStr(spec.outputs[i].shape) +
                                   ", expected its operand's " +
                                   shapeStr(spec.inputs[first + i].shape));
    }
    if (spec.inputs[0].shape != yShape)
      return nodeError(spec, "dY is " + shapeStr(spec.inputs[0].shape) +
                                 ", expected " + shapeStr(yShape));
  } else {
    floats.push_back(&spec.outputs[0]);
    if (spec.outputs[0].shape != yShape)
      return nodeError(spec, "Y is " + shapeStr(spec.outputs[0].shape) +
                                 ", expected " + shapeStr(yShape));
  }
  for (const TensorDesc *t : floats)
    if (t->dtype != g.dtype)
      return nodeError(spec, std::string("Q, KT, V and the results must be "
                                         "of one type; found ") +
                                 dtypeName(g.dtype) + " and " +
                                 dtypeName(t->dtype));
  double scale = spec.attrs.getFloat("scale", 1.0);
  if (!std::isfinite(scale))
    return nodeError(spec, "scale must be finite");
  g.scale = float(scale);
  // An absent mask comes as an empty f32 descriptor (Kernel.h).
  g.hasMask = spec.inputs.size() > first + 3 &&
              (spec.inputs[first + 3].dtype != DType::F32 ||
               !spec.inputs[first + 3].shape.empty());
  g.maskOffset.assign(size_t(g.batch), 0);
  if (g.hasMask) {
    const TensorDesc &mask = spec.inputs[first + 3];
    if (mask.dtype != DType::Bool)
      return nodeError(spec, std::string("the mask has element type ") +
                                 dtypeName(mask.dtype) +
                                 ", expected bool (true: masked out)");
    std::vector<int64_t> scores = q.shape;
    scores.back() = g.n;
    if (!broadcastsTo(mask.shape, scores))
      return nodeError(spec, "the mask " + shapeStr(mask.shape) +
                                 " does not broadcast onto the scores " +
                                 shapeStr(scores));
    // Strides of the mask aligned to the scores' dimensions.
    std::vector<int64_t> own = rowMajorStrides(mask.shape);
    std::vector<int64_t> strides(r, 0);
    size_t lead = r - mask.rank();
    for (size_t i = 0; i < mask.rank(); ++i)
      strides[lead + i] = mask.shape[i] == 1 ? 0 : own[i];
    g.maskRowStride = strides[r - 2];
    g.maskColStride = strides[r - 1];
    for (int64_t b = 0; b < g.batch; ++b) {
      int64_t rest = b, off = 0;
      for (size_t i = r - 2; i-- > 0;) {
        off += (rest % scores[i]) * strides[i];
        rest /= scores[i];
      }
      g.maskOffset[size_t(b)] = off;
    }
  }
  return Status::success();
}

Status checkDropout(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 3, 1, 2, {0}, {0}));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 1, DType::Bool));
  if (spec.outputs[0].shape != spec.inputs[0].shape ||
      (spec.outputs.size() > 1 &&
       spec.outputs[1].shape != spec.inputs[0].shape)) {
    return nodeError(spec, "Y and mask must have X's shape");
  }
  return Status::success();
}

Status checkDropoutGrad(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(spec, 2, 4, 1, 1, {0}, {0}));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 1, DType::Bool));
  if (spec.inputs[1].shape != spec.inputs[0].shape ||
      spec.outputs[0].shape != spec.inputs[0].shape) {
    return nodeError(spec, "dY, mask and dX must have one shape");
  }
  return Status::success();
}

Status checkSlice(const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkArity(spec, 1, 5, 1, 1));
  OASR_RETURN_IF_ERROR(checkDType(spec, false, 0, spec.inputs[0].dtype));
  if (spec.inputs.size() == 2 ||
      spec.inputs[0].rank() != spec.outputs[0].rank()) {
    return nodeError(spec, "expects data, starts, ends[, axes[, steps]] "
                           "and a result of the data's rank");
  }
  return Status::success();
}

Status resolveSlice(const std::vector<int64_t> &inShape,
                    const std::vector<int64_t> &outShape,
                    const std::vector<int64_t> &starts,
                    const std::vector<int64_t> &ends, std::vector<int64_t> axes,
                    std::vector<int64_t> steps, std::vector<int64_t> &start,
                    std::vector<int64_t> &step) {
  size_t r = inShape.size();
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return Status::error("starts, ends, axes and steps differ in length");
  }
  start.assign(r, 0);
  step.assign(r, 1);
  std::vector<int64_t> size = inShape;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + int64_t(r) : axes[i];
    if (a < 0 || a >= int64_t(r) || steps[i] == 0) {
      return Status::error("bad axis or zero step");
    }
    int64_t dim = inShape[a], s = starts[i], e = ends[i], st = steps[i];
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      size[a] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      size[a] = s > e ? (s - e - st - 1) / -st : 0;
    }
    start[a] = s;
    step[a] = st;
  }
  if (size != outShape) {
    return Status::error("the slice " + shapeStr(size) + " is not the result " +
                         shapeStr(outShape));
  }
  return Status::success();
}

Status
resolveSliceAtRun(const std::vector<int64_t> &inShape,
                  const std::vector<int64_t> &outShape, size_t operands,
                  const AttrMap &attrs,
                  const std::function<std::vector<int64_t>(size_t)> &ints,
                  std::vector<int64_t> &start, std::vector<int64_t> &step) {
  if (operands >= 3)
    return resolveSlice(inShape, outShape, ints(1), ints(2),
                        operands > 3 ? ints(3) : std::vector<int64_t>{},
                        operands > 4 ? ints(4) : std::vector<int64_t>{}, start,
                        step);
  return resolveSlice(inShape, outShape, attrs.getInts("starts"),
                      attrs.getInts("ends"), attrs.getInts("axes"), {}, start,
                      step);
}

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

/// ONNX Resize's coordinate transformation and sampling along one axis.
static Status resizeAxis(const OpSpec &spec, int64_t in, int64_t out,
                         double scale, ResizeAxis &a) {
  std::string ctm =
      spec.attrs.getString("coordinate_transformation_mode", "half_pixel");
  std::string mode = spec.attrs.getString("mode", "nearest");
  std::string nearest =
      spec.attrs.getString("nearest_mode", "round_prefer_floor");
  a.taps = mode == "nearest" ? 1 : 2;
  a.index.clear();
  a.weight.clear();
  for (int64_t o = 0; o < out; ++o) {
    double x;
    if (ctm == "half_pixel")
      x = (o + 0.5) / scale - 0.5;
    else if (ctm == "pytorch_half_pixel")
      x = out > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
    else if (ctm == "align_corners")
      x = out > 1 ? double(o) * double(in - 1) / double(out - 1) : 0.0;
    else if (ctm == "asymmetric")
      x = o / scale;
    else {
      return nodeError(spec, "coordinate_transformation_mode '" + ctm +
                                 "' is not supported");
    }
    if (a.taps == 1) {
      double r;
      if (nearest == "round_prefer_floor")
        r = x - std::floor(x) == 0.5 ? std::floor(x) : std::round(x);
      else if (nearest == "round_prefer_ceil")
        r = std::round(x);
      else if (nearest == "floor")
        r = std::floor(x);
      else if (nearest == "ceil")
        r = std::ceil(x);
      else {
        return nodeError(spec,
                         "nearest_mode '" + nearest + "' is not supported");
      }
      a.index.push_back(std::clamp<int64_t>(int64_t(r), 0, in - 1));
      a.weight.push_back(1.0f);
      continue;
    }
    x = std::clamp(x, 0.0, double(in - 1));
    int64_t x0 = int64_t(std::floor(x)), x1 = std::min(x0 + 1, in - 1);
    double f = x - double(x0);
    a.index.push_back(x0);
    a.index.push_back(x1);
    a.weight.push_back(float(1.0 - f));
    a.weight.push_back(float(f));
  }
  return Status::success();
}

Status resizeGeom(const OpSpec &spec, ResizeGeom &g) {
  bool grad = spec.opType == "ResizeGrad";
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 4, 1, 1, {0}, {0}));
  // The small (input) and large (result) side of the resampling.
  const auto &x = grad ? spec.outputs[0].shape : spec.inputs[0].shape;
  const auto &y = grad ? spec.inputs[0].shape : spec.outputs[0].shape;
  if ((x.size() != 3 && x.size() != 4) || y.size() != x.size() ||
      x[0] != y[0] || x[1] != y[1]) {
    return nodeError(spec, "expects [N, C, H, W] or [N, C, W] tensors that "
                           "differ only in their spatial sizes, got " +
                               shapeStr(x) + " and " + shapeStr(y));
  }
  std::string mode = spec.attrs.getString("mode", "nearest");
  if (mode != "nearest" && mode != "linear") {
    return nodeError(spec,
                     "mode '" + mode + "' is not supported (nearest, linear)");
  }
  if (spec.attrs.getInt("antialias", 0) != 0 ||
      spec.attrs.getInt("exclude_outside", 0) != 0) {
    return nodeError(spec, "antialias and exclude_outside are not supported");
  }
  bool rank4 = x.size() == 4;
  int64_t inH = rank4 ? x[2] : 1, inW = x.back();
  int64_t outH = rank4 ? y[2] : 1, outW = y.back();
  // Scales from a constant attribute list (scales) when the node has one,
  // else the ratio of the static sizes.
  std::vector<double> scales;
  if (auto *v =
          spec.attrs.has("scales") ? &spec.attrs.all().at("scales") : nullptr)
    if (auto *d = std::get_if<std::vector<double>>(v))
      scales = *d;
  double sh = scales.size() == x.size() ? scales[x.size() - 2]
                                        : double(outH) / double(inH);
  double sw =
      scales.size() == x.size() ? scales.back() : double(outW) / double(inW);
  g.grad = grad;
  g.planes = x[0] * x[1];
  g.inH = inH;
  g.inW = inW;
  OASR_RETURN_IF_ERROR(resizeAxis(spec, inH, outH, rank4 ? sh : 1.0, g.h));
  return resizeAxis(spec, inW, outW, sw, g.w);
}

Status checkConvTransposeAttrs(const OpSpec &spec) {
  std::string autoPad = spec.attrs.getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID") {
    return nodeError(spec, "auto_pad '" + autoPad +
                               "' is not supported (give explicit pads)");
  }
  for (int64_t p : spec.attrs.getInts("output_padding"))
    if (p < 0) {
      return nodeError(spec, "output_padding must be >= 0");
    }
  return Status::success();
}

} // namespace oasr::rt
