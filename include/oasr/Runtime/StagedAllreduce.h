//===- StagedAllreduce.h - A collective via the host ------------*- C++ -*-===//
//
// A collective that moves host memory only (MPI without a GPU-aware
// transport) can still average a buffer that lives on a device: copy the
// buffer to host memory chunk by chunk, reduce each chunk there as soon as
// it has landed while the next ones are copied, and copy each result back
// while the next chunk is reduced. This is that pipeline, with the copies
// behind a small interface (StagingCopies) so that it runs, and is tested,
// without a device: the CUDA communicator of --device=cuda
// --comm-backend=mpi (runtime/cuda/StagedCommunicator.cpp) copies with
// cudaMemcpyAsync on streams of its own, the unit tests with memcpy.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_STAGEDALLREDUCE_H
#define OASR_RUNTIME_STAGEDALLREDUCE_H

#include <cstddef>
#include <functional>
#include <string>

namespace oasr::rt {

/// Copies between one buffer (device memory) and a few host staging slots,
/// started by the pipeline and waited for by it. Copies may run
/// asynchronously: the pipeline waits for a copy in before it reads the
/// slot, and for every copy out before it returns.
class StagingCopies {
public:
  virtual ~StagingCopies();
  /// How many slots there are (at least 1) and the bytes each holds.
  virtual size_t slotCount() const = 0;
  virtual size_t slotBytes() const = 0;
  /// The host memory of slot `s`.
  virtual void *slot(size_t s) = 0;
  /// Starts copying `bytes` from byte `offset` of the buffer into slot `s`.
  /// The copy must not write the slot before the slot's previous copyOut
  /// has read it: the implementation orders the two (a device stream waits
  /// on an event, a synchronous copy is ordered already).
  virtual void copyIn(size_t s, size_t offset, size_t bytes) = 0;
  /// Blocks until slot `s`'s last copyIn has landed.
  virtual void waitIn(size_t s) = 0;
  /// Starts copying `bytes` of slot `s` back to byte `offset` of the buffer.
  virtual void copyOut(size_t s, size_t offset, size_t bytes) = 0;
  /// Blocks until every copyOut started has landed in the buffer.
  virtual void waitOut() = 0;
};

/// Reduces `count` elements of `elemBytes` bytes each through the slots
/// of `copies`: chunk k, elements [k c, min((k + 1) c, count)) with
/// c = slotBytes / elemBytes (slotBytes >= elemBytes), goes into slot
/// k mod slotCount; `reduce(slot, elements)` runs on it (on the calling
/// thread, chunks in order) once it has landed, and it is copied back at
/// once. Up to slotCount chunks are copied in ahead of the one being
/// reduced, so copies overlap the reductions. Returns once every chunk is
/// back in the buffer.
void stagedAllreduce(StagingCopies &copies, size_t count, size_t elemBytes,
                     const std::function<void(void *, size_t)> &reduce);

/// The staged allreduce's chunk when OASR_STAGED_CHUNK_BYTES does not set
/// one: 4 MiB, large enough that a chunk's MPI call and copies cost far
/// more than their start-up, small enough that a large group's first chunk
/// is on the wire after about 1/6 ms of copying.
constexpr size_t kDefaultStagedChunkBytes = size_t(4) << 20;
/// The chunk's limits: at least 4 KiB (smaller chunks pay a copy's and an
/// MPI call's start-up for a few bytes), at most 1 GiB (each rank pins a
/// few chunks of host memory).
constexpr size_t kMinStagedChunkBytes = 4096;
constexpr size_t kMaxStagedChunkBytes = size_t(1) << 30;

/// The chunk the environment asks for (OASR_STAGED_CHUNK_BYTES, a number
/// of bytes), else kDefaultStagedChunkBytes. Returns 0 with `error` set
/// naming the variable when its value is not a number within the limits.
size_t stagedChunkBytesFromEnv(std::string &error);

} // namespace oasr::rt

#endif // OASR_RUNTIME_STAGEDALLREDUCE_H
