//===- Render.cpp - Chrome trace and SVG Gantt views of timelines ---------===//

#include "oasr/Schedule/Render.h"

#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace llvm;
using namespace oasr::schedule;

/// Names of the gradients in group `g`, in ready order.
static json::Array groupNames(const std::vector<ReadyGrad> &ready,
                              const GroupTiming &g) {
  json::Array names;
  for (unsigned i = g.begin; i < g.end; ++i)
    names.push_back(ready[i].name);
  return names;
}

json::Value oasr::schedule::chromeTrace(const Profile &profile,
                                        ArrayRef<Timeline> timelines) {
  std::vector<ReadyGrad> ready = readyOrder(profile);
  json::Array events;
  auto meta = [&](StringRef what, int pid, int tid, std::string name) {
    events.push_back(json::Object{{"ph", "M"},
                                  {"name", what},
                                  {"pid", pid},
                                  {"tid", tid},
                                  {"args", json::Object{{"name", name}}}});
  };
  auto span = [&](int pid, int tid, std::string name, StringRef cat,
                  double start, double end, json::Object args) {
    events.push_back(json::Object{{"ph", "X"},
                                  {"name", name},
                                  {"cat", cat},
                                  {"pid", pid},
                                  {"tid", tid},
                                  {"ts", start},
                                  {"dur", end - start},
                                  {"args", std::move(args)}});
  };
  for (size_t k = 0; k < timelines.size(); ++k) {
    const Timeline &t = timelines[k];
    int pid = k + 1;
    meta("process_name", pid, 0,
         formatv("{0} (iteration {1:f1} us)", t.strategy, t.iterationUs).str());
    events.push_back(json::Object{{"ph", "M"},
                                  {"name", "process_sort_index"},
                                  {"pid", pid},
                                  {"args", json::Object{{"sort_index", pid}}}});
    meta("thread_name", pid, 1, "compute");
    meta("thread_name", pid, 2, "communication");
    if (t.forwardUs > 0)
      span(pid, 1, "forward", "forward", 0, t.forwardUs, {});
    for (const LayerSpan &l : t.backward)
      span(pid, 1, profile.layers[l.layer].name, "backward", l.startUs, l.endUs,
           json::Object{{"layer", l.layer}});
    double updateStart = std::max(t.backwardEndUs, t.commEndUs);
    if (t.updateUs > 0)
      span(pid, 1, "update", "update", updateStart, updateStart + t.updateUs,
           {});
    for (size_t g = 0; g < t.groups.size(); ++g) {
      const GroupTiming &gt = t.groups[g];
      span(pid, 2, formatv("group {0}", g).str(), "allreduce", gt.startUs,
           gt.endUs,
           json::Object{{"bytes", int64_t(gt.bytes)},
                        {"ready_us", gt.readyUs},
                        {"grads", groupNames(ready, gt)}});
    }
  }
  return json::Object{{"traceEvents", std::move(events)},
                      {"displayTimeUnit", "ms"}};
}

/// Escapes text for SVG/XML content and attributes. XML 1.0 forbids most
/// control characters even as character references (only tab, LF and CR
/// are allowed), and U+FFFE/U+FFFF: those, and bytes that are not UTF-8,
/// become U+FFFD, so any layer name gives a well-formed document.
std::string oasr::schedule::xmlText(StringRef s) {
  static const char kReplacement[] = "\xEF\xBF\xBD"; // U+FFFD
  std::string out;
  const auto *p = reinterpret_cast<const UTF8 *>(s.data());
  const auto *end = p + s.size();
  while (p < end) {
    unsigned char c = *p;
    if (c >= 0x80) {
      const UTF8 *start = p;
      UTF32 codePoint;
      if (convertUTF8Sequence(&p, end, &codePoint, strictConversion) !=
          conversionOK) {
        out += kReplacement; // one per byte that starts no valid sequence
        p = start + 1;
      } else if (codePoint == 0xFFFE || codePoint == 0xFFFF) {
        out += kReplacement;
      } else {
        out.append(reinterpret_cast<const char *>(start), p - start);
      }
      continue;
    }
    ++p;
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    case '\t':
    case '\n':
    case '\r':
      // As references, so attribute values keep them.
      out += "&#" + std::to_string(unsigned(c)) + ";";
      break;
    default:
      if (c < 0x20)
        out += kReplacement;
      else
        out += char(c);
    }
  }
  return out;
}

std::string oasr::schedule::ganttSVG(const Profile &profile,
                                     ArrayRef<Timeline> timelines) {
  std::vector<ReadyGrad> ready = readyOrder(profile);
  const double width = 1200, left = 190, right = 30, top = 50, laneH = 18,
               blockH = 64, axisH = 40;
  double span = 1;
  for (const Timeline &t : timelines)
    span = std::max(span, t.iterationUs);
  double height = top + blockH * timelines.size() + axisH;
  double scale = (width - left - right) / span;
  auto x = [&](double us) { return left + us * scale; };
  bool ms = span >= 10000;
  auto fmtTime = [&](double us) {
    return ms ? formatv("{0:f1} ms", us / 1000).str()
              : formatv("{0:f1} us", us).str();
  };

  std::string out;
  raw_string_ostream os(out);
  os << formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
                "height=\"{1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
                width, height);
  os << formatv("<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n", width,
                height);
  os << formatv("<text x=\"10\" y=\"22\" font-size=\"15\" "
                "font-weight=\"bold\">{0}: compute (blue) and allreduce "
                "(green) per strategy</text>\n",
                xmlText(profile.model.empty() ? "profile" : profile.model));

  auto rect = [&](double y, double a, double b, StringRef fill,
                  const std::string &tip) {
    double w = std::max(0.5, x(b) - x(a));
    os << formatv("<rect x=\"{0:f2}\" y=\"{1:f1}\" width=\"{2:f2}\" "
                  "height=\"{3}\" fill=\"{4}\" stroke=\"white\" "
                  "stroke-width=\"0.3\"><title>{5}</title></rect>\n",
                  x(a), y, w, laneH, fill, xmlText(tip));
  };

  for (size_t k = 0; k < timelines.size(); ++k) {
    const Timeline &t = timelines[k];
    double y0 = top + blockH * k;
    os << formatv(
        "<text x=\"10\" y=\"{0:f1}\" font-weight=\"bold\">{1}</text>\n",
        y0 + 14, xmlText(t.strategy));
    os << formatv("<text x=\"10\" y=\"{0:f1}\">{1}, {2} groups</text>\n",
                  y0 + 30, fmtTime(t.iterationUs), t.groups.size());
    os << formatv("<text x=\"{0}\" y=\"{1:f1}\" fill=\"#555\" "
                  "text-anchor=\"end\" font-size=\"10\">compute</text>\n",
                  left - 4, y0 + 13);
    os << formatv("<text x=\"{0}\" y=\"{1:f1}\" fill=\"#555\" "
                  "text-anchor=\"end\" font-size=\"10\">comm</text>\n",
                  left - 4, y0 + 13 + laneH + 4);
    double yc = y0, ym = y0 + laneH + 4;
    if (t.forwardUs > 0)
      rect(yc, 0, t.forwardUs, "#9ecae1", "forward");
    for (size_t i = 0; i < t.backward.size(); ++i) {
      const LayerSpan &l = t.backward[i];
      rect(yc, l.startUs, l.endUs, i % 2 ? "#6baed6" : "#2171b5",
           formatv("{0}: backward {1:f1}-{2:f1} us",
                   profile.layers[l.layer].name, l.startUs, l.endUs)
               .str());
    }
    double updateStart = std::max(t.backwardEndUs, t.commEndUs);
    if (t.updateUs > 0)
      rect(yc, updateStart, updateStart + t.updateUs, "#fd8d3c", "update");
    for (size_t g = 0; g < t.groups.size(); ++g) {
      const GroupTiming &gt = t.groups[g];
      std::string tip = formatv("group {0}: {1} bytes, {2:f1}-{3:f1} us:", g,
                                gt.bytes, gt.startUs, gt.endUs)
                            .str();
      for (unsigned i = gt.begin; i < gt.end && i < gt.begin + 8; ++i)
        (tip += " ") += ready[i].name;
      if (gt.end - gt.begin > 8)
        tip += formatv(" ... ({0} tensors)", gt.end - gt.begin).str();
      rect(ym, gt.startUs, gt.endUs, g % 2 ? "#74c476" : "#238b45", tip);
    }
    // Iteration end marker.
    os << formatv("<line x1=\"{0:f2}\" x2=\"{0:f2}\" y1=\"{1:f1}\" "
                  "y2=\"{2:f1}\" stroke=\"#d62728\" stroke-width=\"1.5\"/>\n",
                  x(t.iterationUs), y0 - 2, y0 + 2 * laneH + 6);
  }

  // Time axis with about ten round ticks.
  double axisY = top + blockH * timelines.size() + 5;
  os << formatv("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:f1}\" y2=\"{2:f1}\" "
                "stroke=\"black\"/>\n",
                left, width - right, axisY);
  double raw = span / 10, mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag * (raw / mag < 2 ? 2 : raw / mag < 5 ? 5 : 10);
  for (double v = 0; v <= span + 1e-9; v += step) {
    os << formatv("<line x1=\"{0:f2}\" x2=\"{0:f2}\" y1=\"{1:f1}\" "
                  "y2=\"{2:f1}\" stroke=\"black\"/>\n",
                  x(v), axisY, axisY + 5);
    os << formatv("<text x=\"{0:f2}\" y=\"{1:f1}\" text-anchor=\"middle\" "
                  "font-size=\"10\">{2}</text>\n",
                  x(v), axisY + 17, fmtTime(v));
  }
  os << "</svg>\n";
  return out;
}
