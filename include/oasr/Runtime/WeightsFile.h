//===- WeightsFile.h - Trained weights in the user's format ----*- C++ -*-===//
//
// `oasr-run --save=FILE.safetensors`: every parameter and buffer the run
// holds (BatchNorm's running statistics, masks, tables; not optimizer
// state) by its ONNX initializer name, which oasr.export keeps as PyTorch's
// state_dict() name, in Hugging Face's safetensors format: an 8-byte
// little-endian header length, a JSON header {NAME: {"dtype", "shape",
// "data_offsets": [begin, end]}, "__metadata__": {...}} padded with spaces
// to 8 bytes, then the tensors' bytes. Written with our own few lines: no
// C++ safetensors library is packaged for Debian; the tests read the file
// with PyPI's safetensors.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_WEIGHTSFILE_H
#define OASR_RUNTIME_WEIGHTSFILE_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace oasr::rt {

class Executor;

/// Writes `exec`'s parameters and buffers to `path` (atomically: a
/// temporary file renamed over it), and for each BatchNorm statistic
/// `M.running_mean`, PyTorch's `M.num_batches_tracked` (an int64 scalar
/// the ONNX graph does not hold) as `batchesTracked`, the training forwards
/// run. Returns the number of tensors written.
llvm::Expected<size_t> writeSafetensors(const std::string &path, Executor &exec,
                                        int64_t batchesTracked);

/// Whether `path` names a safetensors file (by its extension).
bool isSafetensorsPath(const std::string &path);

} // namespace oasr::rt

#endif // OASR_RUNTIME_WEIGHTSFILE_H
