//===- MetricsPlot.cpp - An SVG plot of oasr-run's --metrics file ---------===//
//
// Draws up to three panels stacked over one step axis: the loss (training
// "loss" as a line, "eval_loss" as a dashed line with a marker per point),
// the learning rate "lr", and the accuracy ("accuracy" and "eval_accuracy",
// in percent). Each series becomes one polyline per run of finite values, so
// a NaN or a step that goes back (a resumed run appending) breaks it. The
// look is ganttSVG's (lib/Schedule/Render.cpp): hand-written SVG text,
// sans-serif, a bold title, round ticks.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/MetricsPlot.h"
#include "oasr/Schedule/Render.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

using namespace llvm;
using namespace oasr::rt;

namespace {

/// One point of a series; a NaN value breaks the line there.
struct Sample {
  double step, value;
};

/// One plotted quantity, its samples in file order.
struct Series {
  const char *key, *label, *color;
  double scale; ///< 100 for fractions shown in percent
  bool markers; ///< a dashed line with a marker at each point
  std::vector<Sample> samples;
};

struct Panel {
  const char *title;
  std::vector<Series> series;
};

/// An axis from `lo` to `hi` with `ticks` ticks `step` apart.
struct Axis {
  double lo, hi, step;
  int ticks;
};

} // namespace

static const double kWidth = 900, kLeft = 80, kRight = 20, kTop = 50,
                    kPanelH = 170, kGap = 60, kBottom = 45;

/// `v` formatted by the printf format `f`.
static std::string num(double v, const char *f = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// The value of `key`: a number, NaN for the strings formatJSON writes for
/// non-finite numbers, nothing when absent or of another kind.
static std::optional<double> metric(const json::Object &o, StringRef key) {
  const json::Value *v = o.get(key);
  if (!v)
    return std::nullopt;
  if (std::optional<double> d = v->getAsNumber())
    return *d;
  std::optional<StringRef> s = v->getAsString();
  if (s && (*s == "NaN" || *s == "Infinity" || *s == "-Infinity"))
    return std::nan("");
  return std::nullopt;
}

/// The panels with every series of a metrics line, in the order drawn.
static std::vector<Panel> emptyPanels() {
  const char *train = "#1f77b4", *eval = "#ff7f0e";
  return {{"loss",
           {{"loss", "train loss", train, 1, false, {}},
            {"eval_loss", "eval loss", eval, 1, true, {}}}},
          {"learning rate", {{"lr", "learning rate", "#2ca02c", 1, false, {}}}},
          {"accuracy (%)",
           {{"accuracy", "train accuracy", train, 100, false, {}},
            {"eval_accuracy", "eval accuracy", eval, 100, true, {}}}}};
}

/// Adds the value of `s` on line `o` of step `step`, if it has one.
static void addSample(Series &s, const json::Object &o, double step) {
  std::optional<double> v = metric(o, s.key);
  if (!v)
    return;
  if (!s.samples.empty() && s.samples.back().step > step)
    s.samples.push_back({step, std::nan("")}); // a new run starts over
  s.samples.push_back({step, *v * s.scale});
}

static bool isFinite(const Sample &p) { return std::isfinite(p.value); }

/// The panels of `jsonl` that have a finite value, each keeping only its
/// series that have one.
static std::vector<Panel> readPanels(StringRef jsonl) {
  std::vector<Panel> panels = emptyPanels();
  SmallVector<StringRef> lines;
  jsonl.split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (StringRef line : lines) {
    Expected<json::Value> v = json::parse(line.trim());
    if (!v) {
      consumeError(v.takeError()); // cut short: skip it
      continue;
    }
    const json::Object *o = v->getAsObject();
    std::optional<double> step = o ? o->getNumber("step") : std::nullopt;
    if (!step || !std::isfinite(*step))
      continue;
    for (Panel &p : panels)
      for (Series &s : p.series)
        addSample(s, *o, *step);
  }
  for (Panel &p : panels)
    llvm::erase_if(p.series, [](const Series &s) {
      return llvm::none_of(s.samples, isFinite);
    });
  llvm::erase_if(panels, [](const Panel &p) { return p.series.empty(); });
  return panels;
}

/// A round axis over [lo, hi] with at most `maxTicks` ticks (3 or more for
/// 5), spaced 1, 2, 2.5 or 5 times a power of ten and at least `minStep`.
static Axis niceAxis(double lo, double hi, int maxTicks, double minStep = 0) {
  if (hi - lo <= 1e-12 * std::max(std::abs(lo), std::abs(hi))) {
    double pad = lo == 0 ? 1 : std::abs(lo) * 0.1; // flat: widen around it
    lo -= pad;
    hi += pad;
  }
  double mag = std::pow(10, std::floor(std::log10((hi - lo) / maxTicks)));
  double step = 0, a = 0, b = 0;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0, 20.0, 25.0, 50.0, 100.0}) {
    step = std::max(m * mag, minStep);
    a = std::floor(lo / step);
    b = std::ceil(hi / step);
    if (b - a + 1 <= maxTicks)
      break;
  }
  return {a * step, b * step, step, int(b - a) + 1};
}

/// The axis through every finite value of `p`'s series.
static Axis valueAxis(const Panel &p) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series &s : p.series)
    for (const Sample &q : s.samples)
      if (isFinite(q)) {
        lo = std::min(lo, q.value);
        hi = std::max(hi, q.value);
      }
  return niceAxis(lo, hi, 5);
}

/// The shared step axis, through every sample's step.
static Axis stepAxis(const std::vector<Panel> &panels) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Panel &p : panels)
    for (const Series &s : p.series)
      for (const Sample &q : s.samples) {
        lo = std::min(lo, q.step);
        hi = std::max(hi, q.step);
      }
  return niceAxis(lo, hi, 10, /*minStep=*/1);
}

/// Maps axis `a` onto the pixels [from, to].
static double place(const Axis &a, double v, double from, double to) {
  return from + (v - a.lo) / (a.hi - a.lo) * (to - from);
}

/// The frame, grid and tick labels of a panel whose plot area starts at
/// `top`, with its title above it.
static void drawAxes(raw_ostream &os, const Panel &p, const Axis &x,
                     const Axis &y, double top) {
  double right = kWidth - kRight, bottom = top + kPanelH;
  os << "<text x=\"" << kLeft << "\" y=\"" << num(top - 8)
     << "\" font-weight=\"bold\">" << oasr::schedule::xmlText(p.title)
     << "</text>\n";
  for (int i = 0; i < y.ticks; ++i) {
    double v = y.lo + i * y.step, py = place(y, v, bottom, top);
    os << "<line x1=\"" << kLeft << "\" x2=\"" << right << "\" y1=\"" << num(py)
       << "\" y2=\"" << num(py) << "\" stroke=\"#ddd\"/>\n";
    os << "<text x=\"" << kLeft - 6 << "\" y=\"" << num(py + 4)
       << "\" text-anchor=\"end\" font-size=\"10\">"
       << oasr::schedule::xmlText(num(v, "%g")) << "</text>\n";
  }
  for (int i = 0; i < x.ticks; ++i) {
    double v = x.lo + i * x.step, px = place(x, v, kLeft, right);
    os << "<line x1=\"" << num(px) << "\" x2=\"" << num(px) << "\" y1=\""
       << bottom << "\" y2=\"" << bottom + 5 << "\" stroke=\"black\"/>\n";
    os << "<text x=\"" << num(px) << "\" y=\"" << bottom + 17
       << "\" text-anchor=\"middle\" font-size=\"10\">"
       << oasr::schedule::xmlText(num(v, "%g")) << "</text>\n";
  }
  os << "<rect x=\"" << kLeft << "\" y=\"" << top << "\" width=\""
     << right - kLeft << "\" height=\"" << kPanelH
     << "\" fill=\"none\" stroke=\"black\"/>\n";
}

/// One polyline per run of finite samples of `s` (a lone point is a
/// zero-length line, which the round cap draws as a dot), then a marker
/// per finite sample when `s` has markers.
static void drawSeries(raw_ostream &os, const Series &s, const Axis &x,
                       const Axis &y, double top) {
  auto point = [&](const Sample &q) {
    return num(place(x, q.step, kLeft, kWidth - kRight)) + "," +
           num(place(y, q.value, top + kPanelH, top));
  };
  for (auto it = s.samples.begin(); it != s.samples.end();) {
    auto begin = std::find_if(it, s.samples.end(), isFinite);
    it = std::find_if_not(begin, s.samples.end(), isFinite);
    if (begin == it)
      continue;
    std::string points = point(*begin);
    for (auto q = begin + (it - begin > 1); q != it; ++q)
      points += " " + point(*q);
    os << "<polyline fill=\"none\" stroke=\"" << s.color
       << "\" stroke-width=\"1.5\" stroke-linecap=\"round\" "
          "stroke-linejoin=\"round\""
       << (s.markers ? " stroke-dasharray=\"4 3\"" : "") << " points=\""
       << points << "\"/>\n";
  }
  if (!s.markers)
    return;
  for (const Sample &q : s.samples) {
    if (!isFinite(q))
      continue;
    std::string c = point(q);
    size_t comma = c.find(',');
    os << "<circle cx=\"" << c.substr(0, comma) << "\" cy=\""
       << c.substr(comma + 1) << "\" r=\"3\" fill=\"" << s.color << "\"><title>"
       << oasr::schedule::xmlText(std::string(s.label) + " at step " +
                                  num(q.step, "%g") + ": " + num(q.value, "%g"))
       << "</title></circle>\n";
  }
}

/// A swatch and label per series of `p`, right-aligned above its plot.
static void drawLegend(raw_ostream &os, const Panel &p, double top) {
  double x = kWidth - kRight - 130.0 * p.series.size();
  for (const Series &s : p.series) {
    os << "<rect x=\"" << x << "\" y=\"" << num(top - 14)
       << "\" width=\"16\" height=\"3\" fill=\"" << s.color << "\"/>\n";
    os << "<text x=\"" << x + 20 << "\" y=\"" << num(top - 9)
       << "\" font-size=\"11\">" << oasr::schedule::xmlText(s.label)
       << "</text>\n";
    x += 130;
  }
}

/// The svg element's opening tag, white background and bold title.
static void drawHeader(raw_ostream &os, double width, double height,
                       StringRef title) {
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"" << width << "\" height=\"" << height
     << "\" fill=\"white\"/>\n";
  os << "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
     << oasr::schedule::xmlText(title) << "</text>\n";
}

std::string oasr::rt::metricsSVG(StringRef jsonl) {
  std::vector<Panel> panels = readPanels(jsonl);
  std::string out;
  raw_string_ostream os(out);
  if (panels.empty()) {
    drawHeader(os, 240, 40, "no metrics");
    os << "</svg>\n";
    return out;
  }
  double height = kTop + panels.size() * (kPanelH + kGap) - kGap + kBottom;
  drawHeader(os, kWidth, height, "Training metrics");
  Axis x = stepAxis(panels);
  for (size_t i = 0; i < panels.size(); ++i) {
    double top = kTop + i * (kPanelH + kGap);
    Axis y = valueAxis(panels[i]);
    drawAxes(os, panels[i], x, y, top);
    for (const Series &s : panels[i].series)
      drawSeries(os, s, x, y, top);
    drawLegend(os, panels[i], top);
  }
  os << "<text x=\"" << (kLeft + kWidth - kRight) / 2 << "\" y=\"" << height - 8
     << "\" text-anchor=\"middle\">step</text>\n";
  os << "</svg>\n";
  return out;
}

Error oasr::rt::writeMetricsPlot(const std::string &jsonlPath,
                                 std::string *svgPathOut) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> in =
      MemoryBuffer::getFile(jsonlPath, /*IsText=*/true);
  if (!in)
    return createStringError(in.getError(), "cannot read %s: %s",
                             jsonlPath.c_str(),
                             in.getError().message().c_str());
  SmallString<256> svgPath(jsonlPath);
  if (sys::path::extension(svgPath) == ".jsonl")
    sys::path::replace_extension(svgPath, ".svg");
  else
    svgPath += ".svg";
  std::error_code ec;
  raw_fd_ostream os(svgPath, ec, sys::fs::OF_Text);
  if (ec)
    return createStringError(ec, "cannot write %s: %s", svgPath.c_str(),
                             ec.message().c_str());
  os << metricsSVG((*in)->getBuffer());
  os.close();
  if (std::error_code err = os.error()) {
    os.clear_error(); // reported here, not by the destructor
    return createStringError(err, "cannot write %s: %s", svgPath.c_str(),
                             err.message().c_str());
  }
  if (svgPathOut)
    *svgPathOut = svgPath.str().str();
  return Error::success();
}
