//===- ImageFuzzer.cpp - libFuzzer target: the image folder's decoders ----===//
//
// One input is one file of an image folder (--data=imagefolder): decoded
// as a JPEG or PNG (by its first bytes) to 3 and to 1 channels, as the
// loader does; an image that decodes is cropped at random and resampled to
// 8x8, whose values must lie in [0, 1].
//
//===----------------------------------------------------------------------===//

#include "../../runtime/data/Sharding.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace oasr::rt::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  for (int64_t c : {3, 1}) {
    Pixels px;
    if (!decodeImage(bytes, c, px).empty())
      continue;
    if (px.w <= 0 || px.h <= 0 || px.data.size() != size_t(px.w * px.h * c)) {
      std::fprintf(stderr, "decoded %lldx%lld into %zu bytes\n",
                   (long long)px.w, (long long)px.h, px.data.size());
      std::abort();
    }
    std::mt19937_64 rng(size);
    float out[3 * 8 * 8];
    for (Crop crop :
         {randomResizedCrop(px.h, px.w, rng), centerCrop(px.h, px.w, 8, 8)}) {
      resample(px, c, crop, 8, 8, out);
      for (int64_t i = 0; i < c * 64; ++i)
        if (!(out[i] >= -1e-6f && out[i] <= 1.0f + 1e-6f)) {
          std::fprintf(stderr, "resampled value %g outside [0, 1]\n",
                       double(out[i]));
          std::abort();
        }
    }
  }
  return 0;
}
