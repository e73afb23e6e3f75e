//===- PowerSGD.h - Groups sent as low-rank factors -------------*- C++ -*-===//
//
// PowerSGD (Vogels, Karimireddy, Jaggi, NeurIPS 2019), as PyTorch's
// powerSGD_hook runs it, on a fused group in host memory, on the
// communication thread. For each gradient matrix G (n x m: the gradient
// reshaped to its first dimension by the rest) that compression pays for
// (schedule::powerSgdCompresses):
//   M = G + E                      (E: this rank's error feedback)
//   P = M Q                        (Q: m x r, warm-started across steps)
//   P = average of P over ranks    (one collective, with the group's vectors)
//   P = orthonormal columns of P   (Gram-Schmidt)
//   Q = average of M^T P           (the second collective)
//   G = P Q^T,  E = M - G
// Every rank computes the same P, Q and G bit for bit: they come out of
// the collectives or from them alone, by fixed-order loops (no threads,
// no library whose blocking depends on the thread count). The products of
// a rank's own M (M Q, M^T P: summed by the collectives) are oneDNN's sgemm
// on one thread, which gives the same result for the same operands. E
// stays on its rank; checkpoints carry Q and every rank's E, so a resumed
// run continues bitwise.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_POWERSGD_H
#define OASR_RUNTIME_POWERSGD_H

#include "oasr/Runtime/Executor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace oasr::rt {

class Communicator;

class PowerSgd {
public:
  /// `seed` draws the first Q of every matrix (the same on every rank).
  explicit PowerSgd(uint64_t seed) : seed(seed) {}

  /// Averages group `g` (f32, host memory) over the ranks in place, sending
  /// its matrices as rank `g.powerSgdRank` factors. Called on the
  /// communication thread, one group at a time.
  void reduce(Communicator &c, const GradGroup &g);
  /// reduce of a group in device memory, on a host copy: `c` copies the
  /// group's buffer to the host after its compute mark
  /// (Communicator::copyGradientsToHost), the factors' collectives run on
  /// host memory (the device communicators send it through MPI), and the
  /// averaged group is copied back. The arithmetic is the host's, so the
  /// same gradients give the CPU backend's result bit for bit.
  void reduceStaged(Communicator &c, const GradGroup &g);

  /// Bytes sent per rank by the last reduce of each kind, for reports.
  struct Stats {
    uint64_t groups = 0;      ///< compressed reduces so far
    uint64_t wireFloats = 0;  ///< floats of their collectives
    uint64_t wireBytes = 0;   ///< their bytes in the wire type
    uint64_t denseFloats = 0; ///< floats the groups hold
    double computeUs = 0;     ///< time in compression's own loops
  };
  Stats stats() const { return totals; }

  /// Adds what the error feedback holds for `group`'s matrices to its
  /// gradients and forgets their state: a group sent plain after a plan
  /// change sends the error its matrices kept. On the communication thread,
  /// before the group's allreduce.
  void flushInto(const GradGroup &group);
  /// Whether any of `group`'s matrices has state (flushInto would add).
  bool holds(const GradGroup &group) const;

  /// The state a checkpoint carries, for the gradients `params` (the
  /// executor's gradient order, the same under any plan): per gradient a
  /// flag, and for a matrix with state its rank, rows, columns and Q (the
  /// same on every rank); this rank's error feedback apart. It does not
  /// depend on the groups, so a run resumes it under another plan or rank
  /// (a matrix sent plain there sends its error; a higher rank adds Q's
  /// rows, a lower keeps the first).
  std::vector<float> saveShared(llvm::ArrayRef<std::string> params) const;
  std::vector<float> saveLocal(llvm::ArrayRef<std::string> params) const;
  /// Restores what saveShared/saveLocal wrote; `elements` is each
  /// gradient's size. An empty `shared` (a checkpoint of a run that did
  /// not compress) starts fresh. Errors say what does not fit.
  llvm::Error restore(llvm::ArrayRef<std::string> params,
                      llvm::ArrayRef<uint64_t> elements,
                      const std::vector<float> &shared,
                      const std::vector<float> &local);

private:
  struct Matrix {
    std::vector<float> qt;    ///< Q^T: r x m, the warm start
    std::vector<float> error; ///< E: n x m
    size_t rows = 0;          ///< n
    bool started = false;
  };
  /// flushInto for one gradient of `n` elements at `grad`; whether the
  /// parameter had state.
  bool flushInto(float *grad, const std::string &param, size_t n);
  /// reduce with the group's f32 elements at `buf` (its buffer, or a host
  /// copy of it).
  void reduceAt(Communicator &c, const GradGroup &g, float *buf);
  Matrix &matrixFor(const std::string &param, int64_t rows, int64_t cols,
                    unsigned rank);

  uint64_t seed;
  std::map<std::string, Matrix> matrices; ///< by parameter
  std::vector<float> first, second;       ///< the two collectives' buffers
  std::vector<uint16_t> wireScratch;      ///< them in a 16-bit wire type
  std::vector<float> staged;              ///< reduceStaged's host copy
  Stats totals;
};

/// Compression's compute on this thread, as the planner charges it
/// (schedule::formCost: per multiply-add of PowerSGD's products, 3nmr + nr^2
/// for an n x m matrix at rank r, and per element of the matrix for the
/// passes over it): PowerSgd::reduce timed on a `rows` x `cols` matrix at
/// ranks 1 and 8 over a one-rank communicator (no network), the median of
/// `reps` reduces each, and the two rates solved from the two times
/// (`oasr-bench comm` records them; never negative).
struct CompressionRate {
  double usPerMac = 0, usPerElement = 0;
};
CompressionRate measureCompressionRate(int64_t rows = 1024, int64_t cols = 1024,
                                       int reps = 5);

} // namespace oasr::rt

#endif // OASR_RUNTIME_POWERSGD_H
