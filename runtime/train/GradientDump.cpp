//===- GradientDump.cpp - Parameters and gradients of a step, to a file ---===//
//
// The .npz writer is NumPy's format written directly: a zip archive of
// stored (uncompressed) members, each an .npy file (magic, version 1.0, a
// Python-literal header padded to 64 bytes, then the little-endian f4
// elements in C order). Members are built and written one tensor at a time.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/GradientDump.h"
#include "oasr/Runtime/Executor.h"
#include "oasr/Support/JSON.h"

#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <vector>

using namespace oasr::rt;

namespace {

std::vector<float> hostFloats(Executor &exec, const TensorRef &t) {
  std::vector<float> v(size_t(t.numel()));
  exec.backend().copyToHost(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

//===----------------------------------------------------------------------===//
// .npz
//===----------------------------------------------------------------------===//

/// An .npy file of f4 elements with `shape`.
std::string npyBytes(const std::vector<int64_t> &shape,
                     const std::vector<float> &values) {
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dims.resize(dims.size() - 2); // "2, 3" (a 1-tuple keeps its comma)
  else if (shape.size() == 1)
    dims.pop_back(); // "5,"
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + header length (2) + header, a multiple of 64,
  // the header ending in a newline.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  size_t at = out.size();
  out.resize(at + values.size() * sizeof(float));
  std::memcpy(&out[at], values.data(), values.size() * sizeof(float));
  return out;
}

/// A zip archive of stored members, written as they come.
class ZipWriter {
public:
  explicit ZipWriter(llvm::raw_fd_ostream &os) : os(os) {}

  llvm::Error add(const std::string &name, const std::string &data) {
    if (data.size() > 0xffffffffull || offset > 0xffffffffull)
      return llvm::createStringError(
          "member '%s' needs ZIP64 (over 4 GiB), which is not written",
          name.c_str());
    if (entries.size() == 0xffff)
      return llvm::createStringError("more than 65535 arrays");
    uint32_t crc = llvm::crc32(llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>(data.data()), data.size()));
    Entry e{name, crc, uint32_t(data.size()), uint32_t(offset)};
    std::string h;
    put32(h, 0x04034b50);
    common(h, e);
    put16(h, 0); // extra length
    h += name;
    os << h << data;
    offset += h.size() + data.size();
    entries.push_back(std::move(e));
    return llvm::Error::success();
  }

  /// The central directory and its end record.
  void finish() {
    std::string cd;
    for (const Entry &e : entries) {
      put32(cd, 0x02014b50);
      put16(cd, 20); // made by: version 2.0
      common(cd, e);
      put16(cd, 0); // extra
      put16(cd, 0); // comment
      put16(cd, 0); // disk
      put16(cd, 0); // internal attributes
      put32(cd, 0); // external attributes
      put32(cd, e.offset);
      cd += e.name;
    }
    std::string end;
    put32(end, 0x06054b50);
    put16(end, 0);
    put16(end, 0);
    put16(end, uint16_t(entries.size()));
    put16(end, uint16_t(entries.size()));
    put32(end, uint32_t(cd.size()));
    put32(end, uint32_t(offset));
    put16(end, 0);
    os << cd << end;
  }

private:
  struct Entry {
    std::string name;
    uint32_t crc, size, offset;
  };
  static void put16(std::string &s, uint16_t v) {
    s += char(v & 0xff);
    s += char(v >> 8);
  }
  static void put32(std::string &s, uint32_t v) {
    put16(s, uint16_t(v & 0xffff));
    put16(s, uint16_t(v >> 16));
  }
  /// The fields local and central headers share, from "version needed".
  static void common(std::string &s, const Entry &e) {
    put16(s, 20);   // version needed: 2.0
    put16(s, 0);    // flags
    put16(s, 0);    // stored
    put16(s, 0);    // time 00:00
    put16(s, 0x21); // date 1980-01-01
    put32(s, e.crc);
    put32(s, e.size); // compressed
    put32(s, e.size); // uncompressed
    put16(s, uint16_t(e.name.size()));
  }

  llvm::raw_fd_ostream &os;
  std::vector<Entry> entries;
  uint64_t offset = 0;
};

llvm::Error writeNpz(llvm::raw_fd_ostream &os, Executor &exec) {
  ZipWriter zip(os);
  if (auto err = zip.add("loss.npy", npyBytes({}, {exec.loss()})))
    return err;
  for (const PersistentTensor &t : exec.persistent()) {
    bool state =
        t.kind == PersistentTensor::State && t.ref.desc.dtype == DType::F32;
    if (t.kind != PersistentTensor::Param && !state)
      continue;
    const std::vector<int64_t> &shape = t.ref.desc.shape;
    if (auto err = zip.add(t.name + (state ? ".state.npy" : ".value.npy"),
                           npyBytes(shape, hostFloats(exec, t.ref))))
      return err;
    if (state)
      continue;
    TensorRef g = exec.gradient(t.name);
    if (!g.data)
      continue; // frozen: no gradient
    if (auto err =
            zip.add(t.name + ".grad.npy", npyBytes(shape, hostFloats(exec, g))))
      return err;
  }
  zip.finish();
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

llvm::json::Array jsonFloats(const std::vector<float> &v) {
  llvm::json::Array a;
  for (float x : v)
    a.push_back(double(x));
  return a;
}

void writeJson(llvm::raw_fd_ostream &os, Executor &exec,
               const GradientMagnitudes *magnitudes) {
  llvm::json::Object params, state;
  for (const PersistentTensor &t : exec.persistent()) {
    if (t.kind == PersistentTensor::State && t.ref.desc.dtype == DType::F32)
      state[t.name] =
          llvm::json::Object{{"value", jsonFloats(hostFloats(exec, t.ref))}};
    if (t.kind != PersistentTensor::Param)
      continue;
    TensorRef g = exec.gradient(t.name);
    llvm::json::Array shape;
    for (int64_t d : t.ref.desc.shape)
      shape.push_back(d);
    llvm::json::Object p{{"shape", std::move(shape)},
                         {"grad", g.data ? jsonFloats(hostFloats(exec, g))
                                         : llvm::json::Array()},
                         {"value", jsonFloats(hostFloats(exec, t.ref))}};
    if (magnitudes)
      if (auto it = magnitudes->abs.find(t.name); it != magnitudes->abs.end())
        p["grad_abs_sum"] = jsonFloats(it->second);
    params[t.name] = std::move(p);
  }
  llvm::json::Object doc{{"loss", double(exec.loss())},
                         {"params", std::move(params)},
                         {"state", std::move(state)}};
  if (magnitudes)
    doc["ranks"] = int64_t(magnitudes->ranks);
  os << oasr::formatJSON(std::move(doc)) << "\n";
}

} // namespace

llvm::Error oasr::rt::writeGradientDump(const std::string &path, Executor &exec,
                                        const GradientMagnitudes *magnitudes) {
  bool npz = llvm::sys::path::extension(path) == ".npz";
  std::error_code ec;
  llvm::raw_fd_ostream os(
      path, ec, npz ? llvm::sys::fs::OF_None : llvm::sys::fs::OF_Text);
  if (ec)
    return llvm::createStringError(ec, "cannot write %s: %s", path.c_str(),
                                   ec.message().c_str());
  if (npz) {
    if (auto err = writeNpz(os, exec))
      return llvm::createStringError("%s: %s", path.c_str(),
                                     llvm::toString(std::move(err)).c_str());
  } else {
    writeJson(os, exec, magnitudes);
  }
  os.close();
  if (os.has_error())
    return llvm::createStringError(os.error(), "cannot write %s: %s",
                                   path.c_str(), os.error().message().c_str());
  return llvm::Error::success();
}
