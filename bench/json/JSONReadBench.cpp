//===- JSONReadBench.cpp - Time reading one large JSON file ---------------===//
//
// Built twice by bench/run_json_read.sh: against the reader of the working
// tree (oasr/Support/JSON.h, on simdjson) and, with OASR_JSON_OLD, against
// the hand-written reader of an older commit (oasr/Schedule/JSON.h). Prints
// one line of medians in milliseconds over RUNS reads of FILE:
//   first  the first JSONDocument::parse in the process (its buffers
//          still to be faulted in, as in a tool that reads one file)
//   parse  JSONDocument::parse of the text
//   copy   a copy of the text into a fresh buffer (what simdjson's padding
//          costs when the caller's buffer has none)
//   walk   parse plus a walk over every value (what a reader touches)
//   error  parse of the text with its last byte changed to an error
//   where  position() of the last layer's value
//
//===----------------------------------------------------------------------===//

#ifdef OASR_JSON_OLD
#include "oasr/Schedule/JSON.h"
using namespace oasr::schedule;
#else
#include "oasr/Support/JSON.h"
using namespace oasr;
#endif

#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

static double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static size_t walk(JSONValue v) {
  size_t n = 1;
  for (JSONValue e : v.elements())
    n += walk(e);
  for (auto kv : v.members())
    n += walk(kv.second);
  return n;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << "usage: " << argv[0] << " FILE [RUNS]\n";
    return 2;
  }
  int runs = argc > 2 ? std::atoi(argv[2]) : 15;
  auto buf = llvm::MemoryBuffer::getFile(argv[1]);
  if (!buf) {
    llvm::errs() << argv[1] << ": " << buf.getError().message() << "\n";
    return 1;
  }
  llvm::StringRef text = (*buf)->getBuffer();
  std::string broken = text.str();
  broken.back() = broken.back() == ']' ? '}' : ']';
  std::vector<double> parse, copy, walked, error, where;
  size_t values = 0;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    {
      auto doc = JSONDocument::parse(text, "f.json");
      if (!doc) {
        llvm::errs() << llvm::toString(doc.takeError()) << "\n";
        return 1;
      }
      parse.push_back(msSince(t0));
      values = walk(doc->root());
      walked.push_back(msSince(t0));
      std::optional<JSONValue> layers = doc->root().get("layers");
      if (!layers || layers->size() == 0)
        return 1;
      JSONValue last = *layers->elements().begin();
      for (JSONValue layer : layers->elements())
        last = layer;
      t0 = std::chrono::steady_clock::now();
      std::string pos = last.position();
      where.push_back(msSince(t0));
    }
    t0 = std::chrono::steady_clock::now();
    std::unique_ptr<char[]> padded(new char[text.size() + 64]);
    std::memcpy(padded.get(), text.data(), text.size());
    copy.push_back(msSince(t0));
    t0 = std::chrono::steady_clock::now();
    auto bad = JSONDocument::parse(broken, "f.json");
    error.push_back(msSince(t0));
    if (bad)
      return 1;
    llvm::consumeError(bad.takeError());
  }
  llvm::outs() << llvm::format(
      "first %.2f parse %.2f copy %.2f walk %.2f error %.2f "
      "where %.2f values %zu\n",
      parse.front(), median(parse), median(copy), median(walked), median(error),
      median(where), values);
  return 0;
}
