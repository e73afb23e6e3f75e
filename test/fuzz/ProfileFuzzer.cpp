//===- ProfileFuzzer.cpp - libFuzzer target: profile/calibration JSON -----===//
//
// One input is one JSON document, read as an oasr-profile-v1 profile and as
// an oasr-comm-v1 calibration (the readers of oasr-plan, oasr-run
// --plan-profile/--comm and the passes' profile=/comm=). A profile that
// reads is written back with toJSON and read again (it must read), and its
// wfbp timeline is drawn as an SVG Gantt chart, which must hold no control
// character XML 1.0 forbids.
//
//===----------------------------------------------------------------------===//

#include "oasr/Schedule/Render.h"
#include "oasr/Schedule/Schedule.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>

using namespace oasr::schedule;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  if (auto comm = parseCalibration(text, "fuzz.json"); !comm)
    llvm::consumeError(comm.takeError());
  auto profile = parseProfile(text, "fuzz.json");
  if (!profile) {
    llvm::consumeError(profile.takeError());
    return 0;
  }
  std::string again;
  llvm::raw_string_ostream os(again);
  os << toJSON(*profile);
  os.flush();
  auto reread = parseProfile(again, "fuzz-again.json");
  if (!reread) {
    llvm::errs() << "a profile written by toJSON does not read back: "
                 << llvm::toString(reread.takeError()) << "\n";
    std::abort();
  }
  // The wfbp timeline drawn as SVG: no byte XML 1.0 forbids may appear.
  CommModel comm = profile->comm.value_or(CommModel());
  auto plan = makePlan("wfbp", *profile, comm);
  if (!plan) {
    llvm::consumeError(plan.takeError());
    return 0;
  }
  Timeline timeline = simulate(*profile, comm, *plan);
  std::string svg = ganttSVG(*profile, timeline);
  for (char c : svg)
    if ((unsigned char)c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      llvm::errs() << "the SVG holds control character "
                   << unsigned((unsigned char)c) << "\n";
      std::abort();
    }
  return 0;
}
