//===- Checkpoint.h - Atomic files, checkpoints and resume ------*- C++ -*-===//
//
// Files the runtime writes must survive a kill in the middle of the write:
// `writeFileAtomically` fills a temporary file next to the target, fsyncs
// it, renames it over the target and fsyncs the directory, so a reader sees
// the old file or the new one, never a part.
//
// A checkpoint is a directory `DIR/step-NNNNNNNN/` holding `manifest.json`
// (format, step, model fingerprint, world size, algorithm, optimizer, update
// count, seed, every rank's data-loader position, the random-number
// positions, and the tensor table) and `tensors.bin` (every persistent
// tensor -- parameters, BN statistics, optimizer state -- back to back, as
// the table says). Rank 0 writes it into `DIR/.tmp-...` and renames the
// directory into place, so a directory named `step-*` is complete.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CHECKPOINT_H
#define OASR_RUNTIME_CHECKPOINT_H

#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/Executor.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace oasr::rt {

/// Writes `path` atomically: `write` fills the temporary file it is given
/// (`.NAME.tmp-HOST-PID-XXXXXX` in the same directory), which is then
/// fsynced and renamed over `path`, and the directory fsynced. On any error
/// the temporary file is removed and `path` is left as it was. A process
/// killed during the write leaves `path` intact and that hidden temporary,
/// which the next write of `path` on the host removes (its process is gone).
llvm::Error
writeFileAtomically(llvm::StringRef path,
                    llvm::function_ref<llvm::Error(llvm::StringRef)> write);

/// How a run checkpoints (oasr-run --checkpoint, --checkpoint-every,
/// --keep-checkpoints) and what must match on resume.
struct CheckpointOptions {
  std::string dir;        ///< where step-NNNNNNNN/ directories go
  int64_t every = 0;      ///< write after every N-th step (0: never)
  int64_t keep = 2;       ///< keep the newest K (0: all)
  std::string algorithm;  ///< "sync-sgd", ...
  std::string dataSource; ///< the --data spec
  uint64_t seed = 0;
  /// --allow-resize: a checkpoint written by another number of ranks fits.
  bool allowResize = false;
};

/// What a checkpoint restores besides the executor's tensors.
struct ResumeState {
  std::string path;  ///< the step directory read
  int64_t step = 0;  ///< steps completed when it was written
  int worldSize = 0; ///< ranks of the run that wrote it
  int64_t batch = 0; ///< its per-rank batch (0: not recorded)
  /// The training algorithm's own state (TrainingAlgorithm::
  /// saveAlgorithmState), to hand to restoreAlgorithmState.
  std::vector<float> algorithmState;
  /// This rank's own state (TrainingAlgorithm::saveRankState).
  std::vector<float> rankState;
};

/// What one rank contributes to a checkpoint besides its tensors.
struct CheckpointContent {
  /// Every rank's tensors (each rank keeps its own weights), not only rank
  /// 0's (the same on every rank).
  bool perRank = false;
  /// The algorithm's state, the same on every rank (written once).
  std::vector<float> algorithmState;
  /// Each rank's own state (gathered; the same size on every rank).
  std::vector<float> rankState;
};

/// A checkpoint read into memory on one rank (to be broadcast).
struct CheckpointBytes {
  std::string path;
  std::string manifest, blob;
};

/// Collective over the engine's ranks: gathers every rank's data-loader
/// position (and, with `content.perRank`, its tensors) to rank 0, which
/// writes `options.dir`/step-NNNNNNNN (step = `completedSteps`) atomically
/// and removes all but the newest `options.keep`. Returns the directory
/// written (on every rank).
llvm::Expected<std::string> saveCheckpoint(Executor &exec, DataLoader &data,
                                           CommEngine &engine,
                                           const CheckpointOptions &options,
                                           int64_t completedSteps,
                                           const CheckpointContent &content);

/// The newest complete checkpoint: `dir` itself when it holds a
/// manifest.json, else its step-* directory with the highest step that
/// holds one. An error names `dir` when there is none.
llvm::Expected<std::string> findLatestCheckpoint(llvm::StringRef dir);

/// Reads a step directory's manifest and tensors, checks the format and the
/// tensors' checksum, and checks that it fits this run: the same model
/// (fingerprint; the error names the first tensor that differs), world
/// size, algorithm, optimizer, data source and seed.
llvm::Expected<CheckpointBytes>
readCheckpoint(llvm::StringRef stepDir, Executor &exec, int worldSize,
               const CheckpointOptions &options);

/// `--resume=DIR`: the newest checkpoint under `dir` (or `dir` itself) that
/// reads intact and fits this run. A damaged one (unreadable or truncated
/// manifest or tensors, a checksum that differs) is skipped for the next
/// older, and `skipped` says which and why; a checkpoint that does not fit
/// the run (another model, world size, ...) is an error, as is finding no
/// intact one.
struct ResumeChoice {
  CheckpointBytes bytes;
  std::vector<std::string> skipped;
};
llvm::Expected<ResumeChoice>
readNewestIntactCheckpoint(llvm::StringRef dir, Executor &exec, int worldSize,
                           const CheckpointOptions &options);

/// Restores a checkpoint read (and checked) by readCheckpoint, on any rank
/// of `worldSize`: every persistent tensor (this rank's own when the
/// checkpoint holds one copy per rank), the update count, the random-number
/// positions, this rank's data-loader position and the algorithm's state.
/// Written by another number of ranks (--allow-resize), a rank the old run
/// did not have takes rank 0's copy, the data positions of every old rank
/// are recut for this run (DataLoader::restoreResized), and each rank's own
/// state starts at zero.
llvm::Expected<ResumeState> restoreCheckpoint(const CheckpointBytes &bytes,
                                              Executor &exec, DataLoader &data,
                                              int rank, int worldSize);

/// The world size and per-rank batch of the newest complete checkpoint
/// under `dir` (as findLatestCheckpoint finds it), from its manifest alone:
/// what --keep-global-batch needs before the model is compiled.
struct CheckpointShape {
  std::string path;
  int worldSize = 0;
  int64_t batch = 0; ///< 0: the checkpoint does not record it
};
llvm::Expected<CheckpointShape> peekCheckpoint(llvm::StringRef dir);

/// Broadcasts rank 0's `bytes` to every rank (collective).
void broadcastCheckpoint(CheckpointBytes &bytes, CommEngine &engine);

/// A fingerprint of the model's persistent tensors (names, kinds, types,
/// shapes) and its optimizer updates, as 16 hex digits.
std::string modelFingerprint(const Executor &exec);

} // namespace oasr::rt

#endif // OASR_RUNTIME_CHECKPOINT_H
