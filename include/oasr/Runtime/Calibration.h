//===- Calibration.h - Measuring the communication the planner models -*-===//
//
// `oasr-bench comm`'s measurement as a library function (runtime/comm/
// Calibration.cpp): the allreduce and its halves over message sizes, the
// alpha-beta fits, the overlap rate per communication-thread priority and
// the priority chosen, written as an `oasr-comm-v1` calibration that
// oasr-plan, the passes and oasr-run read (--comm=FILE).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CALIBRATION_H
#define OASR_RUNTIME_CALIBRATION_H

#include "oasr/Runtime/Communicator.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oasr::rt {

/// What to measure; tools/oasr-bench checks and fills them from its
/// command line (each field's flag in brackets).
struct CalibrationOptions {
  uint64_t minBytes = 4, maxBytes = 1 << 28; ///< [--min-bytes, --max-bytes]
  double secondsPerSize = 0.2;               ///< [--seconds-per-size]
  std::string outPath = "calibration.json";  ///< [--out]
  unsigned computeThreads = 1;               ///< [--compute-threads]
  /// [--comm-priority]; none: measure the candidates and choose.
  std::optional<CommEngine::Priority> priority;
  std::optional<int> commCpu;   ///< [--comm-cpu]
  uint64_t overlapBytes = 0;    ///< [--overlap-bytes]; 0: no overlap
  double burstUs = 0;           ///< [--burst-us]
  uint64_t workingSetBytes = 0; ///< [--working-set-bytes]
  bool quiet = false;           ///< [--quiet]
  bool compressRate = true;     ///< [--compress-rate]
  uint64_t latencyBytes = 0;    ///< [--latency-bytes]; 0: fit alpha
  /// [--collectives]: allreduce, reduce-scatter, all-gather.
  std::vector<std::string> collectives;
  /// [--ranks-per-node]: the nodes of the two-level allreduce's tiers (0:
  /// the MPI library's, measured where ranks share them; -1: not measured).
  int ranksPerNode = 0;
  std::string version; ///< oasr's, for the file's `source`
};

/// Collective: measures on every rank of `comm`; rank 0 writes
/// `opts.outPath` and prints the table and the fits. Returns the exit code
/// (errors are printed as "oasr-bench: error: ...").
int calibrateCommunication(Communicator &comm, const CalibrationOptions &opts);

} // namespace oasr::rt

#endif // OASR_RUNTIME_CALIBRATION_H
