//===- Profile.cpp - Profile and calibration files ------------------------===//
//
// Reads and writes the `oasr-profile-v1` format of DESIGN.md ("Profile
// file") and reads the `oasr-comm-v1` calibration written by `oasr-bench
// comm`. Every validation error names the file, the field and the layer.
// The communication models are CommModel.cpp's, their fits Fitting.cpp's.
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/Schedule.h"
#include "oasr/Support/JSON.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>

using namespace llvm;
using namespace oasr;
using namespace oasr::schedule;

//===----------------------------------------------------------------------===//
// Profile helpers
//===----------------------------------------------------------------------===//

double Profile::backwardUs() const {
  double s = 0;
  for (const Layer &l : layers)
    s += l.backwardUs;
  return s;
}

unsigned Profile::numGrads() const {
  unsigned n = 0;
  for (const Layer &l : layers)
    n += l.grads.size();
  return n;
}

uint64_t Profile::totalBytes() const {
  uint64_t s = 0;
  for (const Layer &l : layers)
    for (const GradTensor &g : l.grads)
      s += g.bytes;
  return s;
}

Profile oasr::schedule::scaleCompute(Profile p, double factor) {
  p.forwardUs *= factor;
  p.updateUs *= factor;
  for (Layer &l : p.layers) {
    l.backwardUs *= factor;
    l.forwardUs *= factor;
  }
  return p;
}

//===----------------------------------------------------------------------===//
// JSON reading
//===----------------------------------------------------------------------===//

namespace {
/// The key path of a field ("layers[3] ('conv2') grads[0] ('conv2.w')"),
/// spelled only when an error needs it: a chain of steps from the top.
struct Where {
  /// "top level", "format", "layers", "grads", "comm", "points".
  StringRef label;
  /// The element of the array `label`, or -1.
  int64_t index = -1;
  /// That element's 'name', once read.
  const std::string *name = nullptr;
  const Where *parent = nullptr;

  void print(raw_ostream &os) const {
    if (parent) {
      parent->print(os);
      os << ' ';
    }
    os << label;
    if (index >= 0)
      os << '[' << index << ']';
    if (name)
      os << " ('" << *name << "')";
  }
};

/// Builds errors that name the file, the path to the offending field and
/// its line and column.
class Reader {
public:
  explicit Reader(StringRef file) : file(file.str()) {}

  /// "FILE: WHERE: MSG (line L column C)", the position of `at`.
  Error error(JSONValue at, const Where &where, const Twine &msg) const {
    std::string s;
    raw_string_ostream os(s);
    os << file << ": ";
    where.print(os);
    os << ": " << msg << " (" << at.position() << ")";
    return createStringError(inconvertibleErrorCode(), s);
  }

  /// Parses JSON `text` and checks that its top level is an object carrying
  /// `"format": format`.
  Expected<JSONDocument> document(StringRef text, StringRef format) const {
    Expected<JSONDocument> doc = JSONDocument::parse(text, file);
    if (!doc)
      return doc.takeError();
    JSONValue root = doc->root();
    Where top{"top level"};
    if (!root.isObject())
      return error(root, top, "expected a JSON object");
    std::string found;
    if (Error e = string(root, "format", top, found, true))
      return std::move(e);
    if (found != format)
      return error(*root.get("format"), Where{"format"},
                   "unknown format version '" + found + "' (expected '" +
                       format + "')");
    return doc;
  }

  /// A non-negative finite number field; `required` says if absence is an
  /// error. Writes `out` only when present. (The reader already refuses a
  /// literal too large for a double, such as 1e400; the finite check stays
  /// as a guard.)
  Error number(JSONValue obj, StringRef key, const Where &where, double &out,
               bool required) const {
    return field(obj, key, where, required, "a number", &JSONValue::getAsNumber,
                 [&](JSONValue v, double d) -> Error {
                   if (!std::isfinite(d))
                     return error(v, where,
                                  "'" + key + "' must be finite, got " +
                                      formatv("{0}", d).str());
                   if (d < 0)
                     return error(v, where,
                                  "'" + key + "' must be >= 0, got " +
                                      formatv("{0}", d).str());
                   out = d;
                   return Error::success();
                 });
  }

  /// The optional fields of a communication model on compute beside it:
  /// 'overlap_rate' in [0, 1], 'compute_rate' in (0, 1] and
  /// 'call_compute_us' >= 0.
  Error overlapFields(JSONValue obj, const Where &where, CommModel &m) const {
    double rate = m.overlapRate;
    if (Error e = number(obj, "overlap_rate", where, rate, false))
      return e;
    if (rate > 1)
      return error(*obj.get("overlap_rate"), where,
                   "'overlap_rate' must be in [0, 1] (the rate "
                   "communication progresses during backward), got " +
                       formatv("{0}", rate).str());
    m.overlapRate = rate;
    double compute = m.computeRate;
    if (Error e = number(obj, "compute_rate", where, compute, false))
      return e;
    if (!(compute > 0 && compute <= 1))
      return error(*obj.get("compute_rate"), where,
                   "'compute_rate' must be in (0, 1] (the rate compute "
                   "progresses beside an allreduce), got " +
                       formatv("{0}", compute).str());
    m.computeRate = compute;
    if (Error e = number(obj, "call_compute_us", where, m.callComputeUs, false))
      return e;
    // Compression's compute as `oasr-bench comm` measured it (>= 0).
    if (Error e = number(obj, "compress_us_per_mac", where, m.compressUsPerMac,
                         false))
      return e;
    return number(obj, "compress_us_per_element", where, m.compressUsPerElement,
                  false);
  }

  /// A non-negative integer field.
  Error integer(JSONValue obj, StringRef key, const Where &where, int64_t &out,
                bool required) const {
    return field(
        obj, key, where, required, "an integer", &JSONValue::getAsInteger,
        [&](JSONValue v, int64_t i) -> Error {
          if (i < 0)
            return error(v, where,
                         "'" + key + "' must be >= 0, got " + Twine(i));
          out = i;
          return Error::success();
        });
  }

  /// The optional 'ranks' field: an integer in [0, INT_MAX] (a larger one
  /// used to be truncated to a negative rank count).
  Error rankCount(JSONValue obj, const Where &where, int64_t &ranks) const {
    if (Error e = integer(obj, "ranks", where, ranks, false))
      return e;
    if (ranks > std::numeric_limits<int>::max())
      return error(*obj.get("ranks"), where,
                   "'ranks' must be at most " +
                       Twine(std::numeric_limits<int>::max()) + ", got " +
                       Twine(ranks));
    return Error::success();
  }

  Error boolean(JSONValue obj, StringRef key, const Where &where, bool &out,
                bool required) const {
    return field(obj, key, where, required, "true or false",
                 &JSONValue::getAsBoolean, [&](JSONValue, bool b) -> Error {
                   out = b;
                   return Error::success();
                 });
  }

  Error string(JSONValue obj, StringRef key, const Where &where,
               std::string &out, bool required) const {
    return field(obj, key, where, required, "a string", &JSONValue::getAsString,
                 [&](JSONValue, StringRef s) -> Error {
                   out = s.str();
                   return Error::success();
                 });
  }

  Expected<CommModel> comm(JSONValue obj, const Where &where) const {
    int64_t ranks = 0;
    if (Error e = rankCount(obj, where, ranks))
      return std::move(e);
    CommModel m;
    if (obj.get("alpha0_s") || obj.get("bandwidth_bytes_per_s")) {
      double alpha0 = 0, bw = 0;
      if (Error e = number(obj, "alpha0_s", where, alpha0, true))
        return std::move(e);
      if (Error e = number(obj, "bandwidth_bytes_per_s", where, bw, true))
        return std::move(e);
      if (ranks < 1)
        return error(obj, where, "ring form needs 'ranks' >= 1");
      if (bw <= 0)
        return error(*obj.get("bandwidth_bytes_per_s"), where,
                     "'bandwidth_bytes_per_s' must be > 0");
      m = CommModel::ring(ranks, alpha0, bw);
    } else {
      double alpha = 0, beta = 0;
      if (Error e = number(obj, "alpha_s", where, alpha, true))
        return std::move(e);
      if (Error e = number(obj, "beta_s_per_byte", where, beta, true))
        return std::move(e);
      m = CommModel::alphaBeta(alpha, beta, ranks);
    }
    if (Error e =
            number(obj, "group_overhead_us", where, m.groupOverheadUs, false))
      return std::move(e);
    if (Error e =
            number(obj, "pack_us_per_byte", where, m.packUsPerByte, false))
      return std::move(e);
    if (Error e = overlapFields(obj, where, m))
      return std::move(e);
    return m;
  }

private:
  /// Field `key` of `obj` read with `get` (a JSONValue getter) and handed to
  /// `take` with its value; absence is an error only when `required`.
  template <typename Get, typename Take>
  Error field(JSONValue obj, StringRef key, const Where &where, bool required,
              StringRef kind, Get get, Take take) const {
    std::optional<JSONValue> v = obj.get(key);
    if (!v) {
      if (required)
        return error(obj, where, "missing '" + key + "'");
      return Error::success();
    }
    auto x = (*v.*get)();
    if (!x)
      return error(*v, where, "'" + key + "' must be " + kind);
    return take(*v, *x);
  }

  std::string file;
};
} // namespace

static Error readTwoLevel(Reader &r, JSONValue obj, const Where &where,
                          CommModel &m);

Expected<Profile> oasr::schedule::parseProfile(StringRef jsonText,
                                               StringRef fileNameForErrors) {
  Reader r(fileNameForErrors);
  Expected<JSONDocument> doc = r.document(jsonText, "oasr-profile-v1");
  if (!doc)
    return doc.takeError();
  JSONValue root = doc->root();
  Where top{"top level"};

  Profile p;
  if (Error e = r.string(root, "model", top, p.model, false))
    return std::move(e);
  if (Error e = r.string(root, "source", top, p.source, false))
    return std::move(e);
  if (Error e = r.boolean(root, "compute_beside_comm", top, p.computeBesideComm,
                          false))
    return std::move(e);
  if (Error e = r.integer(root, "batch", top, p.batch, false))
    return std::move(e);
  if (Error e = r.number(root, "forward_us", top, p.forwardUs, false))
    return std::move(e);
  if (Error e = r.number(root, "update_us", top, p.updateUs, false))
    return std::move(e);

  std::optional<JSONValue> layers = root.get("layers");
  if (!layers)
    return r.error(root, top, "missing 'layers'");
  if (!layers->isArray())
    return r.error(*layers, Where{"layers"}, "must be an array");
  if (layers->size() == 0)
    return r.error(*layers, Where{"layers"}, "must not be empty");

  // Names as the document holds them: no copy per gradient.
  DenseSet<StringRef> gradNames;
  p.layers.reserve(layers->size());
  int64_t li = 0;
  for (JSONValue lo : layers->elements()) {
    Where where{"layers", li++};
    if (!lo.isObject())
      return r.error(lo, where, "expected an object");
    Layer layer;
    if (Error e = r.string(lo, "name", where, layer.name, true))
      return std::move(e);
    where.name = &layer.name;
    if (Error e = r.number(lo, "backward_us", where, layer.backwardUs, true))
      return std::move(e);
    if (Error e = r.number(lo, "forward_us", where, layer.forwardUs, false))
      return std::move(e);
    if (std::optional<JSONValue> grads = lo.get("grads")) {
      if (!grads->isArray())
        return r.error(*grads, where, "'grads' must be an array");
      layer.grads.reserve(grads->size());
      int64_t gi = 0;
      for (JSONValue go : grads->elements()) {
        Where gwhere{"grads", gi++, nullptr, &where};
        if (!go.isObject())
          return r.error(go, gwhere, "expected an object");
        GradTensor g;
        if (Error e = r.string(go, "name", gwhere, g.name, true))
          return std::move(e);
        gwhere.name = &g.name;
        int64_t bytes = 0;
        if (Error e = r.integer(go, "bytes", gwhere, bytes, true))
          return std::move(e);
        g.bytes = bytes;
        int64_t rows = 0;
        if (Error e = r.integer(go, "rows", gwhere, rows, false))
          return std::move(e);
        g.rows = uint64_t(rows);
        if (!gradNames.insert(*go.get("name")->getAsString()).second)
          return r.error(*go.get("name"), gwhere,
                         "duplicate gradient name '" + g.name + "'");
        layer.grads.push_back(std::move(g));
      }
    }
    p.layers.push_back(std::move(layer));
  }

  if (std::optional<JSONValue> co = root.get("comm")) {
    if (!co->isObject())
      return r.error(*co, Where{"comm"}, "expected an object");
    Expected<CommModel> m = r.comm(*co, Where{"comm"});
    if (!m)
      return m.takeError();
    if (Error e = readTwoLevel(r, *co, Where{"comm"}, *m))
      return std::move(e);
    p.comm = *m;
  }
  return p;
}

/// Reads `path` and hands its text to `parse`.
template <typename T>
static Expected<T> readAndParse(StringRef path,
                                Expected<T> (*parse)(StringRef, StringRef)) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buf =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!buf)
    return createStringError(buf.getError(), "cannot read '" + path + "': " +
                                                 buf.getError().message());
  return parse((*buf)->getBuffer(), path);
}

Expected<Profile> oasr::schedule::readProfile(StringRef path) {
  return readAndParse<Profile>(path, parseProfile);
}

json::Object oasr::schedule::twoLevelJSON(const TwoLevelTier &t) {
  return json::Object{
      {"ranks_per_node", t.ranksPerNode},
      {"intra", json::Object{{"alpha_s", t.intraAlphaS},
                             {"beta_s_per_byte", t.intraBetaSPerByte}}},
      {"inter", json::Object{{"alpha_s", t.interAlphaS},
                             {"beta_s_per_byte", t.interBetaSPerByte}}}};
}

json::Value oasr::schedule::toJSON(const Profile &p) {
  json::Array layers;
  for (const Layer &l : p.layers) {
    json::Array grads;
    for (const GradTensor &g : l.grads) {
      json::Object go{{"name", g.name}, {"bytes", int64_t(g.bytes)}};
      if (g.rows)
        go["rows"] = int64_t(g.rows);
      grads.push_back(std::move(go));
    }
    json::Object lo{{"name", l.name}, {"backward_us", l.backwardUs}};
    if (l.forwardUs != 0)
      lo["forward_us"] = l.forwardUs;
    lo["grads"] = std::move(grads);
    layers.push_back(std::move(lo));
  }
  json::Object root{{"format", "oasr-profile-v1"},
                    {"model", p.model},
                    {"batch", p.batch},
                    {"forward_us", p.forwardUs},
                    {"update_us", p.updateUs}};
  if (!p.source.empty())
    root["source"] = p.source;
  if (p.computeBesideComm)
    root["compute_beside_comm"] = true;
  root["layers"] = std::move(layers);
  if (p.comm) {
    const CommModel &m = *p.comm;
    json::Object c;
    if (m.kind == CommModel::Kind::Ring) {
      c["alpha0_s"] = m.alpha0S;
      c["bandwidth_bytes_per_s"] = m.bandwidthBytesPerS;
    } else {
      c["alpha_s"] = m.alphaS;
      c["beta_s_per_byte"] = m.betaSPerByte;
    }
    if (m.ranks)
      c["ranks"] = m.ranks;
    if (m.groupOverheadUs != 0)
      c["group_overhead_us"] = m.groupOverheadUs;
    if (m.packUsPerByte != 0)
      c["pack_us_per_byte"] = m.packUsPerByte;
    if (m.overlapRate != 1)
      c["overlap_rate"] = m.overlapRate;
    if (m.computeRate != 1)
      c["compute_rate"] = m.computeRate;
    if (m.callComputeUs != 0)
      c["call_compute_us"] = m.callComputeUs;
    if (m.compressUsPerMac != 0)
      c["compress_us_per_mac"] = m.compressUsPerMac;
    if (m.compressUsPerElement != 0)
      c["compress_us_per_element"] = m.compressUsPerElement;
    if (m.twoLevel.present())
      c["two_level"] = twoLevelJSON(m.twoLevel);
    root["comm"] = std::move(c);
  }
  return root;
}

//===----------------------------------------------------------------------===//
// Calibration
//===----------------------------------------------------------------------===//

/// Alpha and beta of one collective in a calibration: `obj`'s 'alpha_s' and
/// 'beta_s_per_byte', or a fit of its 'points' (relative error).
static Expected<std::pair<double, double>>
calibrationAlphaBeta(Reader &r, JSONValue obj, const Where &where,
                     int64_t ranks) {
  std::vector<std::pair<double, double>> points;
  std::optional<JSONValue> pv = obj.get("points");
  // Top-level points are named "points", a collective's "all_gather points".
  const Where *parent = where.label == "top level" ? nullptr : &where;
  Where pointsWhere{"points", -1, nullptr, parent};
  if (pv) {
    if (!pv->isArray())
      return r.error(*pv, pointsWhere, "must be an array");
    int64_t i = 0;
    for (JSONValue po : pv->elements()) {
      Where at{"points", i++, nullptr, parent};
      if (!po.isObject())
        return r.error(po, at, "expected an object");
      double bytes = 0, seconds = 0;
      if (Error err = r.number(po, "bytes", at, bytes, true))
        return std::move(err);
      if (Error err = r.number(po, "seconds", at, seconds, true))
        return std::move(err);
      points.push_back({bytes, seconds});
    }
  }
  bool hasAlpha = bool(obj.get("alpha_s")),
       hasBeta = bool(obj.get("beta_s_per_byte"));
  if (hasAlpha != hasBeta)
    return r.error(obj, where,
                   "'alpha_s' and 'beta_s_per_byte' must be given together");
  double alpha = 0, beta = 0;
  if (hasAlpha) {
    if (Error e = r.number(obj, "alpha_s", where, alpha, true))
      return std::move(e);
    if (Error e = r.number(obj, "beta_s_per_byte", where, beta, true))
      return std::move(e);
    return std::pair{alpha, beta};
  }
  if (points.size() < 2)
    return r.error(obj, where,
                   "needs 'alpha_s'/'beta_s_per_byte' or at least two "
                   "'points' to fit them");
  Expected<CommModel> fitted = fitAlphaBeta(points, int(ranks));
  if (!fitted)
    return r.error(*pv, pointsWhere, toString(fitted.takeError()));
  return std::pair{fitted->alphaS, fitted->betaSPerByte};
}

/// The optional 'two_level' object of a calibration or a profile's comm
/// (TwoLevelTier): 'ranks_per_node' >= 2 dividing 'ranks', and 'intra' and
/// 'inter' collectives, each with 'alpha_s'/'beta_s_per_byte' or 'points'.
static Error readTwoLevel(Reader &r, JSONValue obj, const Where &where,
                          CommModel &m) {
  std::optional<JSONValue> tv = obj.get("two_level");
  if (!tv)
    return Error::success();
  const Where *parent = where.label == "top level" ? nullptr : &where;
  Where at{"two_level", -1, nullptr, parent};
  if (!tv->isObject())
    return r.error(*tv, at, "must be an object");
  int64_t perNode = 0;
  if (Error e = r.integer(*tv, "ranks_per_node", at, perNode, true))
    return e;
  if (perNode < 2 || m.ranks < 1 || perNode >= m.ranks ||
      m.ranks % perNode != 0)
    return r.error(*tv->get("ranks_per_node"), at,
                   "'ranks_per_node' must be at least 2 and divide 'ranks' (" +
                       Twine(m.ranks) + ") into two or more nodes, got " +
                       Twine(perNode));
  TwoLevelTier tier;
  tier.ranksPerNode = int(perNode);
  for (auto [key, alpha, beta] :
       {std::tuple{"intra", &tier.intraAlphaS, &tier.intraBetaSPerByte},
        std::tuple{"inter", &tier.interAlphaS, &tier.interBetaSPerByte}}) {
    std::optional<JSONValue> v = tv->get(key);
    Where kw{key, -1, nullptr, &at};
    if (!v)
      return r.error(*tv, at, "missing '" + Twine(key) + "'");
    if (!v->isObject())
      return r.error(*v, kw, "must be an object");
    Expected<std::pair<double, double>> ab =
        calibrationAlphaBeta(r, *v, kw, m.ranks);
    if (!ab)
      return ab.takeError();
    *alpha = ab->first;
    *beta = ab->second;
  }
  m.twoLevel = tier;
  return Error::success();
}

Expected<CommModel> oasr::schedule::parseCalibration(StringRef jsonText,
                                                     StringRef file) {
  Reader r(file);
  Expected<JSONDocument> doc = r.document(jsonText, "oasr-comm-v1");
  if (!doc)
    return doc.takeError();
  JSONValue root = doc->root();
  Where top{"top level"};
  int64_t ranks = 0;
  if (Error e = r.rankCount(root, top, ranks))
    return std::move(e);
  Expected<std::pair<double, double>> ab =
      calibrationAlphaBeta(r, root, top, ranks);
  if (!ab)
    return ab.takeError();
  CommModel m = CommModel::alphaBeta(ab->first, ab->second, ranks);
  if (Error e = r.overlapFields(root, top, m))
    return std::move(e);
  if (Error e = readTwoLevel(r, root, top, m))
    return std::move(e);
  return m;
}

Expected<CollectiveModels>
oasr::schedule::parseCollectiveModels(StringRef jsonText, StringRef file) {
  Expected<CommModel> allreduce = parseCalibration(jsonText, file);
  if (!allreduce)
    return allreduce.takeError();
  Reader r(file);
  Expected<JSONDocument> doc = r.document(jsonText, "oasr-comm-v1");
  if (!doc)
    return doc.takeError();
  JSONValue root = doc->root();
  CollectiveModels out;
  out.allreduce = *allreduce;
  for (auto [key, model] : {std::pair{"reduce_scatter", &out.reduceScatter},
                            std::pair{"all_gather", &out.allGather}}) {
    std::optional<JSONValue> v = root.get(key);
    if (!v)
      continue;
    Where where{key};
    if (!v->isObject())
      return r.error(*v, where, "must be an object");
    Expected<std::pair<double, double>> ab =
        calibrationAlphaBeta(r, *v, where, allreduce->ranks);
    if (!ab)
      return ab.takeError();
    *model = CommModel::alphaBeta(ab->first, ab->second, allreduce->ranks);
  }
  return out;
}

Expected<CollectiveModels>
oasr::schedule::readCollectiveModels(StringRef path) {
  return readAndParse<CollectiveModels>(path, parseCollectiveModels);
}

Expected<CommModel> oasr::schedule::readCalibration(StringRef path) {
  return readAndParse<CommModel>(path, parseCalibration);
}

Expected<std::string> oasr::schedule::readCalibrationPriority(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buf =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (!buf)
    return createStringError(buf.getError(), "cannot read '" + path + "': " +
                                                 buf.getError().message());
  Expected<json::Value> doc = parseJSON((*buf)->getBuffer(), path);
  if (!doc)
    return doc.takeError();
  const json::Object *root = doc->getAsObject();
  const json::Value *v = root ? root->get("comm_priority") : nullptr;
  if (!v)
    return std::string();
  std::optional<StringRef> s = v->getAsString();
  if (!s ||
      (*s != "idle" && *s != "normal" && *s != "sleep" && *s != "realtime"))
    return createStringError(
        inconvertibleErrorCode(),
        path +
            ": 'comm_priority' must be \"idle\", \"normal\", \"sleep\" or "
            "\"realtime\" (the "
            "communication thread's priority oasr-bench comm measured "
            "to overlap better), got " +
            formatv("{0}", *v).str());
  return s->str();
}
