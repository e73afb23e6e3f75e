//===- MetricsPlotTest.cpp - The SVG plot of a --metrics file -------------===//

#include "oasr/Runtime/MetricsPlot.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

using namespace oasr::rt;

namespace {

/// How often `needle` occurs in `text`.
size_t count(const std::string &text, const std::string &needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

/// Whether `svg` is one <svg> element whose tags all close in order.
bool wellFormed(const std::string &svg) {
  std::vector<std::string> open;
  size_t roots = 0;
  for (size_t at = svg.find('<'); at != std::string::npos;
       at = svg.find('<', at + 1)) {
    size_t end = svg.find('>', at);
    if (end == std::string::npos)
      return false;
    std::string tag = svg.substr(at + 1, end - at - 1);
    std::string name = tag.substr(0, tag.find_first_of(" \n/", 1));
    if (tag[0] == '/') {
      if (open.empty() || open.back() != name.substr(1))
        return false;
      open.pop_back();
    } else if (tag.back() != '/') {
      roots += open.empty();
      open.push_back(name);
    } else {
      roots += open.empty();
    }
  }
  return open.empty() && roots == 1 && svg.rfind("<svg ", 0) == 0;
}

std::string train(int step, const std::string &loss) {
  return "{\"step\":" + std::to_string(step) + ",\"loss\":" + loss +
         ",\"samples_per_s\":120.5,\"step_ms\":33.1,\"exposed_comm_ms\":1.2}\n";
}

std::string eval(int step, const std::string &loss) {
  return "{\"step\":" + std::to_string(step) + ",\"eval_loss\":" + loss +
         ",\"eval_samples\":512}\n";
}

TEST(MetricsPlot, OnePolylinePerSeriesAndThreePanels) {
  std::string jsonl =
      "{\"step\":10,\"loss\":3.0,\"lr\":0.001,\"accuracy\":0.2}\n"
      "{\"step\":20,\"loss\":2.5,\"lr\":0.002,\"accuracy\":0.3}\n"
      "{\"step\":20,\"eval_loss\":2.6,\"eval_accuracy\":0.25,"
      "\"perplexity\":13.5,\"eval_samples\":512}\n"
      "{\"step\":30,\"loss\":2.0,\"lr\":0.001,\"accuracy\":0.4}\n"
      "{\"step\":30,\"eval_loss\":2.1,\"eval_accuracy\":0.35}\n";
  std::string svg = metricsSVG(jsonl);
  EXPECT_TRUE(wellFormed(svg)) << svg;
  // loss, eval_loss, lr, accuracy, eval_accuracy.
  EXPECT_EQ(count(svg, "<polyline"), 5u);
  EXPECT_EQ(count(svg, "<circle"), 4u); // two eval points in two panels
  EXPECT_NE(svg.find(">loss</text>"), std::string::npos);
  EXPECT_NE(svg.find(">learning rate</text>"), std::string::npos);
  EXPECT_NE(svg.find(">accuracy (%)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">eval loss</text>"), std::string::npos); // legend
  EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  // Loss 2..3 gets ticks 0.25 apart; accuracy is in percent (20..40).
  EXPECT_NE(svg.find(">2.25</text>"), std::string::npos);
  EXPECT_NE(svg.find(">40</text>"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(MetricsPlot, NonFiniteLossBreaksTheLine) {
  std::string jsonl = train(1, "3") + train(2, "2.5") + train(3, "\"NaN\"") +
                      train(4, "2") + train(5, "1.5");
  std::string svg = metricsSVG(jsonl);
  EXPECT_TRUE(wellFormed(svg));
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  // Two points either side of the gap: one space in each points list.
  EXPECT_EQ(count(svg, "points=\""), 2u);
  size_t at = svg.find("points=\"");
  std::string first = svg.substr(at, svg.find('"', at + 8) - at);
  EXPECT_EQ(count(first, " "), 1u) << first;

  // Infinity breaks it as well; a lone finite point is still drawn.
  std::string lone =
      train(1, "3") + train(2, "\"Infinity\"") + train(3, "2") + train(4, "1");
  EXPECT_EQ(count(metricsSVG(lone), "<polyline"), 2u);
}

TEST(MetricsPlot, StepGoingBackStartsANewLine) {
  std::string jsonl = train(1, "3") + train(2, "2.5") + train(1, "3") +
                      train(2, "2.4") + train(3, "2.2");
  EXPECT_EQ(count(metricsSVG(jsonl), "<polyline"), 2u);
}

TEST(MetricsPlot, LrPanelOnlyWithLr) {
  std::string without = train(1, "3") + train(2, "2");
  std::string svg = metricsSVG(without);
  EXPECT_EQ(svg.find("learning rate"), std::string::npos);
  EXPECT_EQ(svg.find("accuracy"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 1u);

  std::string nanLr = "{\"step\":1,\"loss\":3,\"lr\":\"NaN\"}\n";
  EXPECT_EQ(metricsSVG(nanLr).find("learning rate"), std::string::npos);

  std::string with = "{\"step\":1,\"loss\":3,\"lr\":0.1}\n"
                     "{\"step\":2,\"loss\":2,\"lr\":0.05}\n";
  svg = metricsSVG(with);
  EXPECT_NE(svg.find(">learning rate</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
}

TEST(MetricsPlot, EvalPointsAreMarkers) {
  std::string jsonl = train(10, "3") + eval(10, "2.9") + train(20, "2.5") +
                      eval(20, "\"NaN\"") + train(30, "2") + eval(30, "2.1") +
                      eval(40, "1.9");
  std::string svg = metricsSVG(jsonl);
  EXPECT_TRUE(wellFormed(svg));
  EXPECT_EQ(count(svg, "<circle"), 3u); // the NaN one left out
  // Train loss in one line; eval loss split around its NaN.
  EXPECT_EQ(count(svg, "<polyline"), 3u);
  EXPECT_EQ(count(svg, "stroke-dasharray"), 2u);
  EXPECT_NE(svg.find("<title>eval loss at step 40: 1.9</title>"),
            std::string::npos);
}

TEST(MetricsPlot, UnparsedLinesAreSkipped) {
  std::string good = train(1, "3") + train(2, "2.5") + eval(2, "2.7");
  std::string bad = "garbage\n" + train(1, "3") + "[1,2]\n" + train(2, "2.5") +
                    "\n{\"loss\":1}\n" + eval(2, "2.7") +
                    "{\"step\":3,\"loss\":2.";
  EXPECT_EQ(metricsSVG(bad), metricsSVG(good));
}

TEST(MetricsPlot, NoUsableLine) {
  for (std::string jsonl : {std::string(), std::string("{\"step\":1,\"lo"),
                            std::string("{\"step\":1,\"loss\":\"NaN\"}\n")}) {
    std::string svg = metricsSVG(jsonl);
    EXPECT_TRUE(wellFormed(svg)) << svg;
    EXPECT_NE(svg.find("no metrics"), std::string::npos);
    EXPECT_EQ(count(svg, "<polyline"), 0u);
  }
}

TEST(MetricsPlot, WritesTheSvgBesideTheFile) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("metrics-plot", dir));
  auto write = [&](const char *name, const std::string &text) {
    llvm::SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(p, ec);
    EXPECT_FALSE(ec);
    os << text;
    return std::string(p);
  };
  std::string jsonl = train(1, "3") + train(2, "2");
  std::string in = write("x.jsonl", jsonl), out;
  ASSERT_FALSE(llvm::errorToBool(writeMetricsPlot(in, &out)));
  EXPECT_EQ(out, (dir + "/x.svg").str());
  auto svg = llvm::MemoryBuffer::getFile(out);
  ASSERT_TRUE(bool(svg));
  EXPECT_EQ((*svg)->getBuffer().str(), metricsSVG(jsonl));

  std::string log = write("run.log", jsonl);
  ASSERT_FALSE(llvm::errorToBool(writeMetricsPlot(log, &out)));
  EXPECT_EQ(out, log + ".svg");
  EXPECT_TRUE(llvm::sys::fs::exists(out));
  llvm::sys::fs::remove_directories(dir);
}

TEST(MetricsPlot, ErrorNamesThePath) {
  std::string missing = "/nonexistent-oasr-dir/x.jsonl";
  std::string message = llvm::toString(writeMetricsPlot(missing));
  EXPECT_NE(message.find(missing), std::string::npos) << message;
}

} // namespace
