//===- ImageFolder.cpp - JPEG/PNG folders, decoded and transformed --------===//
//
// --data=imagefolder:DIR, torchvision's ImageFolder layout: one folder per
// class (classes sorted by name, DIR/train used when it exists), JPEG and
// PNG files in each (sorted). Each sample is decoded when it is drawn --
// JPEG with libjpeg-turbo's TurboJPEG API, PNG with libpng's simplified API
// -- converted to the model's channels (gray or RGB, as PIL's convert),
// cropped and resampled to the model's size (PIL's antialiased bilinear
// filter), flipped, scaled to [0, 1] and normalised. A batch decodes in
// parallel (OpenMP, the step's threads, idle while it waits for data).
//
// Transforms are drawn from (seed, epoch, sample): a run is reproducible,
// and a resume continues the loader's position record without repeating
// or skipping a sample.
//
//===----------------------------------------------------------------------===//

#include "Sharding.h"

#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/Status.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace oasr::rt::data {

namespace {

/// Images above this many pixels are refused before they are decoded (a
/// decompression bomb); PIL's Image.MAX_IMAGE_PIXELS.
constexpr int64_t kMaxPixels = 89478485;

struct Transform {
  bool resizedCrop = false, flip = false;
  int64_t pad = -1; ///< crop:PAD; -1 when off
  float mean[3] = {0, 0, 0}, invStd[3] = {1, 1, 1};
};

llvm::Expected<Transform> parseTransform(const ImageOptions &o, int64_t c) {
  Transform t;
  if (!o.eval && o.augment != "none") {
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(o.augment).split(parts, ',');
    for (llvm::StringRef p : parts) {
      if (p == "resized-crop")
        t.resizedCrop = true;
      else if (p == "flip")
        t.flip = true;
      else if (p.consume_front("crop:") && !p.getAsInteger(10, t.pad) &&
               t.pad >= 0)
        continue;
      else
        return fail("--augment=" + o.augment + ": '" + p +
                    "' is not resized-crop, crop:PAD or flip");
    }
    if (t.resizedCrop && t.pad >= 0)
      return fail("--augment=" + o.augment +
                  ": resized-crop and crop:PAD are two crops; choose one");
  }
  if (o.normalize == "none")
    return t;
  std::string spec = o.normalize == "imagenet"
                         ? "0.485,0.456,0.406/0.229,0.224,0.225"
                         : o.normalize;
  auto [m, s] = llvm::StringRef(spec).split('/');
  llvm::SmallVector<llvm::StringRef> ms, ss;
  m.split(ms, ',');
  s.split(ss, ',');
  if (int64_t(ms.size()) != c || int64_t(ss.size()) != c)
    return fail("--normalize=" + o.normalize + ": expected " + llvm::Twine(c) +
                " means and " + llvm::Twine(c) +
                " standard deviations (M,../S,..), one per channel of the "
                "model's input");
  for (int64_t k = 0; k < c; ++k) {
    double mv, sv;
    if (ms[k].trim().getAsDouble(mv) || ss[k].trim().getAsDouble(sv) ||
        !std::isfinite(mv) || !(sv > 0) || !std::isfinite(sv))
      return fail("--normalize=" + o.normalize +
                  ": means must be numbers and standard deviations positive");
    t.mean[k] = float(mv);
    t.invStd[k] = float(1.0 / sv);
  }
  return t;
}

} // namespace

/// The error text of a decode, or empty.
static std::string decodeJpeg(llvm::StringRef bytes, int64_t c, Pixels &out) {
  tjhandle tj = tjInitDecompress();
  if (!tj)
    return "cannot start the JPEG decoder";
  auto done = llvm::make_scope_exit([&] { tjDestroy(tj); });
  int w = 0, h = 0, sub = 0, space = 0;
  const auto *buf = reinterpret_cast<const unsigned char *>(bytes.data());
  if (tjDecompressHeader3(tj, buf, (unsigned long)bytes.size(), &w, &h, &sub,
                          &space) != 0)
    return std::string("not a readable JPEG: ") + tjGetErrorStr2(tj);
  if (space == TJCS_CMYK || space == TJCS_YCCK)
    return "a CMYK JPEG (convert it to RGB)";
  if (int64_t(w) * h > kMaxPixels)
    return std::to_string(w) + "x" + std::to_string(h) +
           " pixels, above the limit of " + std::to_string(kMaxPixels);
  out.w = w;
  out.h = h;
  out.data.resize(size_t(w) * h * size_t(c));
  if (tjDecompress2(tj, buf, (unsigned long)bytes.size(), out.data.data(), w, 0,
                    h, c == 1 ? TJPF_GRAY : TJPF_RGB, 0) != 0)
    return std::string("a damaged JPEG: ") + tjGetErrorStr2(tj);
  return "";
}

static std::string decodePng(llvm::StringRef bytes, int64_t c, Pixels &out) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size()))
    return std::string("not a readable PNG: ") + img.message;
  auto done = llvm::make_scope_exit([&] { png_image_free(&img); });
  if (int64_t(img.width) * img.height > kMaxPixels)
    return std::to_string(img.width) + "x" + std::to_string(img.height) +
           " pixels, above the limit of " + std::to_string(kMaxPixels);
  // Palette, 16-bit, gray and alpha images convert to 8-bit gray or RGB;
  // alpha is composited on black.
  img.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  out.w = img.width;
  out.h = img.height;
  out.data.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, out.data.data(), 0, nullptr))
    return std::string("a damaged PNG: ") + img.message;
  return "";
}

std::string decodeImage(llvm::StringRef bytes, int64_t c, Pixels &out) {
  if (bytes.size() >= 3 && uint8_t(bytes[0]) == 0xFF &&
      uint8_t(bytes[1]) == 0xD8)
    return decodeJpeg(bytes, c, out);
  if (bytes.size() >= 8 && bytes.starts_with("\x89PNG"))
    return decodePng(bytes, c, out);
  return "neither a JPEG nor a PNG image";
}

/// torchvision's RandomResizedCrop.get_params: scale (0.08, 1), ratio
/// (3/4, 4/3), 10 tries, then the central crop of the nearest ratio.
Crop randomResizedCrop(int64_t h, int64_t w, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double area = double(h) * double(w);
  const double lo = std::log(3.0 / 4.0), hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target = area * (0.08 + 0.92 * u(rng));
    double aspect = std::exp(lo + (hi - lo) * u(rng));
    int64_t cw = std::llround(std::sqrt(target * aspect));
    int64_t ch = std::llround(std::sqrt(target / aspect));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      int64_t y = int64_t(u(rng) * double(h - ch + 1));
      int64_t x = int64_t(u(rng) * double(w - cw + 1));
      return {double(std::min(y, h - ch)), double(std::min(x, w - cw)),
              double(ch), double(cw)};
    }
  }
  double ratio = double(w) / double(h);
  double cw = double(w), ch = double(h);
  if (ratio < 3.0 / 4.0)
    ch = std::round(cw / (3.0 / 4.0));
  else if (ratio > 4.0 / 3.0)
    cw = std::round(ch * (4.0 / 3.0));
  return {std::floor((double(h) - ch) / 2), std::floor((double(w) - cw) / 2),
          ch, cw};
}

/// The evaluation crop: the shorter side resized to the model's size over
/// 0.875 (torchvision's Resize(256) + CenterCrop(224)), then the centre of
/// the model's size; an image already of the model's size as it is.
Crop centerCrop(int64_t h, int64_t w, int64_t oh, int64_t ow) {
  if (h == oh && w == ow)
    return {0, 0, double(h), double(w)};
  double scale =
      std::round(double(std::max(oh, ow)) / 0.875) / double(std::min(h, w));
  double ch = std::min(double(h), double(oh) / scale),
         cw = std::min(double(w), double(ow) / scale);
  return {(double(h) - ch) / 2, (double(w) - cw) / 2, ch, cw};
}

/// One axis of a resampling: output index i reads inputs [first[i],
/// first[i] + count[i]) with weights w[i * taps ...] (PIL's
/// precompute_coeffs for its bilinear filter: a triangle of support
/// max(scale, 1), so downscaling averages, as PIL and torchvision's
/// antialiased resize do).
namespace {
struct AxisWeights {
  int64_t taps = 0;
  std::vector<int64_t> first, count;
  std::vector<float> w;
};

} // namespace

static AxisWeights axisWeights(double start, double size, int64_t in,
                               int64_t out) {
  AxisWeights a;
  const double scale = size / double(out), support = std::max(scale, 1.0);
  a.taps = int64_t(std::ceil(support)) * 2 + 1;
  a.first.resize(size_t(out));
  a.count.resize(size_t(out));
  a.w.assign(size_t(out * a.taps), 0.0f);
  for (int64_t i = 0; i < out; ++i) {
    const double center = start + (double(i) + 0.5) * scale;
    int64_t lo = std::max<int64_t>(0, int64_t(center - support + 0.5));
    int64_t hi = std::min<int64_t>(in, int64_t(center + support + 0.5));
    hi = std::min(hi, lo + a.taps);
    double total = 0;
    std::vector<double> ws(size_t(std::max<int64_t>(hi - lo, 0)));
    for (int64_t j = lo; j < hi; ++j) {
      double t = std::fabs((double(j) + 0.5 - center) / support);
      ws[size_t(j - lo)] = t < 1.0 ? 1.0 - t : 0.0;
      total += ws[size_t(j - lo)];
    }
    if (total <= 0) { // a crop narrower than a pixel: its nearest input
      lo = std::min<int64_t>(in - 1, std::max<int64_t>(0, int64_t(center)));
      hi = lo + 1;
      ws.assign(1, 1.0);
      total = 1.0;
    }
    a.first[size_t(i)] = lo;
    a.count[size_t(i)] = hi - lo;
    for (int64_t j = 0; j < hi - lo; ++j)
      a.w[size_t(i * a.taps + j)] = float(ws[size_t(j)] / total);
  }
  return a;
}

/// The crop of `px` resampled to [c, oh, ow] f32 in [0, 1]: separable
/// triangle-filter resampling (PIL's bilinear resize with a box), rows
/// first. oneDNN's resampling compiles a kernel per shape, which random
/// crops make per image, and does not antialias.
void resample(const Pixels &px, int64_t c, Crop crop, int64_t oh, int64_t ow,
              float *dst) {
  AxisWeights ax = axisWeights(crop.x, crop.w, px.w, ow),
              ay = axisWeights(crop.y, crop.h, px.h, oh);
  const int64_t y0 = ay.first.front(), y1 = ay.first.back() + ay.count.back();
  // Horizontal pass over the rows the vertical one reads: [y1 - y0, ow, c].
  std::vector<float> rows(size_t((y1 - y0) * ow * c));
  for (int64_t y = y0; y < y1; ++y) {
    const uint8_t *line = px.data.data() + size_t(y * px.w * c);
    float *out = rows.data() + size_t((y - y0) * ow * c);
    for (int64_t x = 0; x < ow; ++x) {
      const float *w = ax.w.data() + x * ax.taps;
      const uint8_t *p = line + ax.first[size_t(x)] * c;
      float acc[3] = {0, 0, 0};
      for (int64_t j = 0; j < ax.count[size_t(x)]; ++j)
        for (int64_t k = 0; k < c; ++k)
          acc[k] += w[j] * float(p[j * c + k]);
      for (int64_t k = 0; k < c; ++k)
        out[x * c + k] = acc[k];
    }
  }
  // Vertical pass: whole rows at a time (contiguous, vectorisable), then
  // the interleaved row split into the channel planes.
  std::vector<float> line(size_t(ow * c));
  for (int64_t y = 0; y < oh; ++y) {
    const float *w = ay.w.data() + y * ay.taps;
    const int64_t f = ay.first[size_t(y)] - y0, n = ay.count[size_t(y)];
    std::fill(line.begin(), line.end(), 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float *r = rows.data() + size_t((f + j) * ow * c);
      const float wj = w[j] * (1.0f / 255.0f);
      for (int64_t e = 0; e < ow * c; ++e)
        line[size_t(e)] += wj * r[e];
    }
    for (int64_t x = 0; x < ow; ++x)
      for (int64_t k = 0; k < c; ++k)
        dst[(k * oh + y) * ow + x] = line[size_t(x * c + k)];
  }
}

namespace {

struct ImageFile {
  std::string path;
  int64_t label;
};

/// The folder's samples, drawn and decoded as the step asks for them.
class ImageFolderLoader : public WalkedLoader {
public:
  ImageFolderLoader(std::string what, std::vector<ImageFile> files,
                    const SampleShape &shape, Transform t, int rank, int size,
                    uint64_t seed, bool skipBad)
      : WalkedLoader(std::move(what),
                     EpochWalk(int64_t(files.size()), rank, size, seed)),
        files(std::move(files)), shape(shape), t(t), seed(seed),
        skipBad(skipBad) {}
  void setHeldOut(std::string spec) { heldOut = std::move(spec); }
  void nextBatch(float *images, int64_t *labels, int64_t n) override {
    std::vector<int64_t> index(static_cast<size_t>(n));
    std::vector<uint64_t> epoch(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      index[size_t(k)] = walk.next();
      epoch[size_t(k)] = walk.currentEpoch();
    }
    std::vector<std::string> errors(static_cast<size_t>(n));
    auto start = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic)
    for (int64_t k = 0; k < n; ++k)
      errors[size_t(k)] =
          load(index[size_t(k)], epoch[size_t(k)], images + k * shape.features);
    for (int64_t k = 0; k < n; ++k) {
      // A bad sample stops the run, or (skip) gives way to the next one.
      for (int64_t tries = 0; !errors[size_t(k)].empty(); ++tries) {
        const ImageFile &bad = files[size_t(index[size_t(k)])];
        if (!skipBad || tries > int64_t(files.size()))
          fatalDataError("--data=" + what + ": " + bad.path + ": " +
                         errors[size_t(k)] +
                         (skipBad ? " (every sample tried)" : ""));
        std::fprintf(stderr, "oasr-run: warning: --data=%s: skipped %s: %s\n",
                     what.c_str(), bad.path.c_str(), errors[size_t(k)].c_str());
        ++skipped;
        index[size_t(k)] = walk.next();
        errors[size_t(k)] = load(index[size_t(k)], walk.currentEpoch(),
                                 images + k * shape.features);
      }
      labels[k] = files[size_t(index[size_t(k)])].label;
    }
    decodeSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    decoded += n;
  }
  std::string heldOutSpec() const override { return heldOut; }
  std::string report() const override {
    std::string line = std::to_string(decoded) + " images decoded in ";
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f s", decodeSeconds);
    line += secs;
    line += " of the run's time";
    if (skipped)
      line += ", " + std::to_string(skipped) + " bad sample(s) skipped";
    return line;
  }

private:
  /// Sample `i` of epoch `epoch` into `dst` [C, H, W]; the error, or empty.
  std::string load(int64_t i, uint64_t epoch, float *dst) const {
    const int64_t c = shape.dims[0], oh = shape.dims[1], ow = shape.dims[2];
    auto buf = readFile(files[size_t(i)].path);
    if (!buf)
      return llvm::toString(buf.takeError());
    llvm::StringRef bytes = (*buf)->getBuffer();
    Pixels px;
    if (std::string err = decodeImage(bytes, c, px); !err.empty())
      return err;
    std::mt19937_64 rng(
        mix64(seed ^ mix64(epoch * 0x9E3779B97F4A7C15ull + uint64_t(i))));
    if (t.pad >= 0) {
      // Fit to the model's size, pad, crop at random (CIFAR's recipe).
      std::vector<float> fitted(size_t(c * oh * ow));
      resample(px, c, centerCrop(px.h, px.w, oh, ow), oh, ow, fitted.data());
      std::uniform_int_distribution<int64_t> off(0, 2 * t.pad);
      int64_t dy = off(rng) - t.pad, dx = off(rng) - t.pad;
      for (int64_t k = 0; k < c; ++k)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x) {
            int64_t sy = y + dy, sx = x + dx;
            dst[(k * oh + y) * ow + x] =
                sy >= 0 && sy < oh && sx >= 0 && sx < ow
                    ? fitted[size_t((k * oh + sy) * ow + sx)]
                    : 0.0f;
          }
    } else {
      resample(px, c,
               t.resizedCrop ? randomResizedCrop(px.h, px.w, rng)
                             : centerCrop(px.h, px.w, oh, ow),
               oh, ow, dst);
    }
    if (t.flip && (rng() >> 63))
      for (int64_t k = 0; k < c; ++k)
        for (int64_t y = 0; y < oh; ++y)
          std::reverse(dst + (k * oh + y) * ow, dst + (k * oh + y + 1) * ow);
    for (int64_t k = 0; k < c; ++k)
      for (int64_t e = 0; e < oh * ow; ++e)
        dst[k * oh * ow + e] = (dst[k * oh * ow + e] - t.mean[k]) * t.invStd[k];
    return "";
  }

  std::vector<ImageFile> files;
  SampleShape shape;
  Transform t;
  uint64_t seed;
  bool skipBad;
  std::string heldOut; ///< imagefolder:DIR/val when DIR/train was used
  int64_t decoded = 0, skipped = 0;
  double decodeSeconds = 0;
};

bool isImageName(llvm::StringRef name) {
  std::string ext = llvm::sys::path::extension(name).lower();
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

} // namespace

llvm::Expected<std::unique_ptr<DataLoader>>
loadImageFolder(llvm::StringRef arg, const SampleShape &shape, int rank,
                int size, uint64_t seed, const ImageOptions &options) {
  std::string spec = ("--data=imagefolder:" + arg).str();
  if (shape.tokens || shape.dims.size() != 3 ||
      (shape.dims[0] != 1 && shape.dims[0] != 3))
    return fail(spec + ": the model's input is not images [N, 1 or 3, H, W]");
  auto t = parseTransform(options, shape.dims[0]);
  if (!t)
    return t.takeError();
  std::string dir = arg.str();
  if (llvm::sys::fs::is_directory(dir + "/train"))
    dir += "/train";
  if (!llvm::sys::fs::is_directory(dir))
    return fail(spec + ": " + dir + " is not a directory");
  llvm::SmallString<256> root;
  if (llvm::sys::fs::real_path(dir, root))
    return fail(spec + ": cannot resolve " + dir);
  // Classes: the subfolders, sorted by name (torchvision's ImageFolder).
  std::vector<std::string> classes;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    if (llvm::sys::fs::is_directory(it->path()))
      classes.push_back(llvm::sys::path::filename(it->path()).str());
  if (ec)
    return fail(spec + ": " + dir + ": " + ec.message());
  llvm::sort(classes);
  if (classes.empty())
    return fail(spec + ": " + dir +
                " has no class folders (one folder per class, images in "
                "each)");
  if (shape.classes > 0 && int64_t(classes.size()) > shape.classes)
    return fail(spec + ": " + llvm::Twine(classes.size()) +
                " class folders, more than the model's " +
                llvm::Twine(shape.classes) + " classes");
  std::vector<ImageFile> files;
  for (auto [label, name] : llvm::enumerate(classes)) {
    std::string cdir = dir + "/" + name;
    std::vector<std::string> names;
    for (llvm::sys::fs::directory_iterator it(cdir, ec), end; it != end && !ec;
         it.increment(ec)) {
      llvm::SmallString<256> real;
      if (llvm::sys::fs::real_path(it->path(), real))
        return fail(spec + ": " + it->path() +
                    ": cannot be resolved (a broken or looping link)");
      if (!llvm::StringRef(real).starts_with(root.str().str() + "/"))
        return fail(spec + ": " + it->path() + " links out of " + dir);
      if (llvm::sys::fs::is_directory(real))
        continue;
      if (!isImageName(it->path()))
        return fail(spec + ": " + it->path() +
                    " is not a .jpg, .jpeg or .png file");
      names.push_back(it->path());
    }
    if (ec)
      return fail(spec + ": " + cdir + ": " + ec.message());
    if (names.empty())
      return fail(spec + ": class folder " + cdir + " holds no images");
    llvm::sort(names);
    for (std::string &p : names)
      files.push_back({std::move(p), int64_t(label)});
  }
  std::string what =
      "imagefolder:" + arg.str() + " (" + std::to_string(files.size()) +
      " images, " + std::to_string(classes.size()) +
      " classes: " + classes.front() + " = 0" +
      (classes.size() > 1 ? " .. " + classes.back() + " = " +
                                std::to_string(classes.size() - 1)
                          : std::string()) +
      ")";
  if (options.badSamples != "error" && options.badSamples != "skip")
    return fail("--bad-samples=" + options.badSamples +
                ": expected error or skip");
  auto loader = std::make_unique<ImageFolderLoader>(
      what, std::move(files), shape, *t, rank, size, seed,
      options.badSamples == "skip");
  if (llvm::StringRef(dir).ends_with("/train") &&
      llvm::sys::fs::is_directory(arg.str() + "/val"))
    loader->setHeldOut("imagefolder:" + arg.str() + "/val");
  return loader;
}

} // namespace oasr::rt::data
