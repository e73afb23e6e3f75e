//===- RenderTest.cpp - Chrome trace and SVG views ------------------------===//

#include "oasr/Schedule/Render.h"
#include "TestUtil.h"

#include "gtest/gtest.h"

using namespace oasr::schedule;
using namespace oasr::schedule::test;

namespace {

TEST(Render, ChromeTraceHasLanesLayersAndGroups) {
  Profile p = makeProfile({5, 3, 6}, {4, 3, 6}, /*forward=*/2, /*update=*/1);
  p.layers[1].name = "a<b>&\"c\"";
  CommModel m = unitModel(4, 1);
  std::vector<Timeline> tls = {
      simulate(p, m, planFromSizes("wfbp", {1, 1, 1})),
      simulate(p, m, planFromSizes("optimal", {1, 2}))};
  llvm::json::Value v = chromeTrace(p, tls);
  const llvm::json::Array *events = v.getAsObject()->getArray("traceEvents");
  ASSERT_TRUE(events);
  unsigned meta = 0, compute = 0, comm = 0;
  for (const llvm::json::Value &e : *events) {
    const llvm::json::Object *o = e.getAsObject();
    llvm::StringRef ph = *o->getString("ph");
    if (ph == "M") {
      ++meta;
      continue;
    }
    EXPECT_EQ(ph, "X");
    int64_t tid = *o->getInteger("tid");
    (tid == 1 ? compute : comm) += 1;
    if (tid == 2 && *o->getInteger("pid") == 2 &&
        *o->getString("name") == "group 1") {
      EXPECT_EQ(*o->getNumber("ts"), 18);  // max(ready 16, end 8 + 10)
      EXPECT_EQ(*o->getNumber("dur"), 11); // 4 + 7
      const llvm::json::Array *grads = o->getObject("args")->getArray("grads");
      ASSERT_EQ(grads->size(), 2u);
      EXPECT_EQ(*(*grads)[0].getAsString(), "l1.w");
    }
  }
  EXPECT_EQ(meta, 2u * 4);              // name, sort index, two threads
  EXPECT_EQ(compute, 2u * (1 + 3 + 1)); // forward, layers, update
  EXPECT_EQ(comm, 3u + 2);
}

TEST(Render, SvgNamesEveryStrategyAndEscapes) {
  Profile p = makeProfile({5, 3, 6}, {4, 3, 6});
  p.model = "m&m";
  p.layers[1].name = "a<b>";
  CommModel m = unitModel(4, 1);
  std::vector<Timeline> tls = {
      simulate(p, m, planFromSizes("wfbp", {1, 1, 1})),
      simulate(p, m, planFromSizes("optimal", {1, 2}))};
  std::string svg = ganttSVG(p, tls);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find(">wfbp</text>"), std::string::npos);
  EXPECT_NE(svg.find(">optimal</text>"), std::string::npos);
  EXPECT_NE(svg.find("27.0 us, 2 groups"), std::string::npos);
  EXPECT_NE(svg.find("m&amp;m"), std::string::npos);
  EXPECT_NE(svg.find("a&lt;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("a<b>"), std::string::npos);
}

} // namespace
