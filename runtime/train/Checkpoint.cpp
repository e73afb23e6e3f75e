//===- Checkpoint.cpp - Atomic files, checkpoints and resume -------------===//

#include "oasr/Runtime/Checkpoint.h"
#include "oasr/Schedule/Schedule.h"
#include "oasr/Support/JSON.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <signal.h>
#include <unistd.h>

namespace oasr::rt {

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

static constexpr const char *kFormat = "oasr-checkpoint-v1";

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 message.str().c_str());
}

static llvm::Error errnoError(const llvm::Twine &what) {
  return makeError(what + ": " + std::strerror(errno));
}

/// fsync of a file or a directory by name.
static llvm::Error syncPath(llvm::StringRef p, bool directory) {
  int fd = ::open(p.str().c_str(), O_RDONLY | (directory ? O_DIRECTORY : 0));
  if (fd < 0)
    return errnoError(p + ": cannot open to sync");
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0)
    return errnoError(p + ": fsync failed");
  return llvm::Error::success();
}

static std::string parentDir(llvm::StringRef p) {
  llvm::StringRef parent = path::parent_path(p);
  return parent.empty() ? "." : parent.str();
}

/// Writes `bytes` to a new file `p` and fsyncs it.
static llvm::Error writeAndSync(llvm::StringRef p, llvm::StringRef bytes) {
  int fd =
      ::open(p.str().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return errnoError(p + ": cannot write");
  const char *data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int saved = errno;
      ::close(fd);
      errno = saved;
      return errnoError(p + ": write failed");
    }
    data += n;
    left -= size_t(n);
  }
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    return errnoError(p + ": fsync failed");
  }
  if (::close(fd) != 0)
    return errnoError(p + ": close failed");
  return llvm::Error::success();
}

/// This host's name, for temporary files' names.
static std::string hostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0)
    return "host";
  return buf;
}

/// Removes temporary files of earlier writes of `target` that were killed
/// midway: `.NAME.tmp-HOST-PID-XXXXXX` of this host whose process is gone.
static void removeStaleTemporaries(llvm::StringRef dir,
                                   llvm::StringRef prefix) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef leaf = path::filename(it->path());
    if (!leaf.consume_front(prefix))
      continue;
    int pid = 0;
    if (leaf.split('-').first.getAsInteger(10, pid) || pid <= 0)
      continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH)
      fs::remove(it->path());
  }
}

llvm::Error
writeFileAtomically(llvm::StringRef target,
                    llvm::function_ref<llvm::Error(llvm::StringRef)> write) {
  std::string dir = parentDir(target);
  std::string prefix =
      "." + path::filename(target).str() + ".tmp-" + hostName() + "-";
  removeStaleTemporaries(dir, prefix);
  llvm::SmallString<256> model(dir);
  path::append(model, prefix + std::to_string(::getpid()) + "-%%%%%%");
  int fd = -1;
  llvm::SmallString<256> tmp;
  if (std::error_code ec = fs::createUniqueFile(model, fd, tmp))
    return makeError(target + ": cannot create a temporary file in " + dir +
                     ": " + ec.message());
  ::close(fd);
  auto fail = [&](llvm::Error err) {
    fs::remove(tmp);
    return err;
  };
  if (llvm::Error err = write(tmp))
    return fail(std::move(err));
  if (llvm::Error err = syncPath(tmp, /*directory=*/false))
    return fail(std::move(err));
  if (std::error_code ec = fs::rename(tmp, target))
    return fail(makeError(target + ": cannot rename " + tmp +
                          " over it: " + ec.message()));
  return syncPath(dir, /*directory=*/true);
}

//===----------------------------------------------------------------------===//
// Fingerprint and manifest
//===----------------------------------------------------------------------===//

static const char *kindName(PersistentTensor::Kind k) {
  switch (k) {
  case PersistentTensor::Param:
    return "param";
  case PersistentTensor::State:
    return "state";
  case PersistentTensor::OptState:
    return "optimizer";
  }
  return "?";
}

/// One line per persistent tensor: "kind name dtype d0xd1...".
static std::string tensorLine(const PersistentTensor &t) {
  std::string shape;
  for (int64_t d : t.ref.desc.shape)
    shape += (shape.empty() ? "" : "x") + std::to_string(d);
  return std::string(kindName(t.kind)) + " " + t.name + " " +
         dtypeName(t.ref.desc.dtype) + " [" + shape + "]";
}

std::string modelFingerprint(const Executor &exec) {
  std::string text = exec.optimizerName() + "\n";
  for (const PersistentTensor &t : exec.persistent())
    text += tensorLine(t) + "\n";
  return llvm::utohexstr(llvm::xxh3_64bits(text), /*LowerCase=*/true, 16);
}

static std::string stepDirName(int64_t step) {
  return llvm::formatv("step-{0:d8}", step).str();
}

/// The step of a `step-NNNNNNNN` name, or -1.
static int64_t stepOfName(llvm::StringRef name) {
  int64_t step = -1;
  if (!name.consume_front("step-") || name.empty() ||
      name.getAsInteger(10, step))
    return -1;
  return step;
}

/// Complete checkpoints under `dir`: step -> directory.
static std::map<int64_t, std::string> listCheckpoints(llvm::StringRef dir) {
  std::map<int64_t, std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    int64_t step = stepOfName(path::filename(it->path()));
    llvm::SmallString<256> manifest(it->path());
    path::append(manifest, "manifest.json");
    if (step >= 0 && fs::exists(manifest))
      found[step] = it->path();
  }
  return found;
}

namespace {

/// What a checkpoint gathers on rank 0: the tensors (rank 0's, or every
/// rank's copy rank after rank), every rank's data position and own state.
struct CheckpointBlob {
  std::string blob;
  size_t rankBytes = 0; ///< one rank's tensors
  std::vector<char> dataStates, rankStates;
  std::vector<size_t> dataCounts, rankStateSizes;
};

/// Collective: every rank's part of the checkpoint to rank 0.
CheckpointBlob gatherCheckpoint(const Executor &exec, DataLoader &data,
                                CommEngine &engine,
                                const CheckpointContent &content) {
  CheckpointBlob g;
  // Every rank's data position to rank 0.
  std::string mine = data.saveState();
  engine.run([&](Communicator &c) {
    c.gatherBytes(mine.data(), mine.size(), 0, g.dataStates, g.dataCounts);
  });
  const bool writer = engine.communicator().rank() == 0;
  if (writer || content.perRank) {
    for (const PersistentTensor &t : exec.persistent()) {
      size_t bytes = t.ref.bytes(), at = g.blob.size();
      g.blob.resize(at + bytes);
      exec.backend().copyToHost(g.blob.data() + at, t.ref.data, bytes);
    }
  }
  g.rankBytes = g.blob.size();
  // Every rank's own state to rank 0, after everything else.
  engine.run([&](Communicator &c) {
    c.gatherBytes(content.rankState.data(),
                  content.rankState.size() * sizeof(float), 0, g.rankStates,
                  g.rankStateSizes);
  });
  if (content.perRank) {
    std::vector<char> all;
    std::vector<size_t> sizes;
    engine.run([&](Communicator &c) {
      c.gatherBytes(g.blob.data(), g.blob.size(), 0, all, sizes);
    });
    if (writer)
      g.blob.assign(all.data(), all.size());
  }
  return g;
}

/// Rank 0: the algorithm's and the ranks' own states appended to the blob,
/// and the manifest describing it.
llvm::Expected<llvm::json::Object>
checkpointManifest(Executor &exec, const CheckpointOptions &options,
                   int64_t completedSteps, const CheckpointContent &content,
                   int size, CheckpointBlob &g) {
  std::string &blob = g.blob;
  const size_t rankBytes = g.rankBytes;
  llvm::json::Array dataStates;
  size_t off = 0;
  for (size_t r = 0; r < g.dataCounts.size(); ++r) {
    dataStates.push_back(
        std::string(g.dataStates.data() + off, g.dataCounts[r]));
    off += g.dataCounts[r];
  }
  llvm::json::Array table;
  // The algorithm's state after the tensors.
  const size_t algorithmOffset = blob.size();
  blob.append(reinterpret_cast<const char *>(content.algorithmState.data()),
              content.algorithmState.size() * sizeof(float));
  const size_t rankStateOffset = blob.size();
  const size_t rankStateFloats = content.rankState.size();
  for (size_t n : g.rankStateSizes)
    if (n != rankStateFloats * sizeof(float))
      return makeError("--checkpoint: the ranks' own states differ in size");
  blob.append(g.rankStates.data(), g.rankStates.size());
  size_t at = 0;
  for (const PersistentTensor &t : std::as_const(exec).persistent()) {
    size_t bytes = t.ref.bytes();
    llvm::json::Array shape;
    for (int64_t d : t.ref.desc.shape)
      shape.push_back(d);
    table.push_back(llvm::json::Object{{"name", t.name},
                                       {"kind", kindName(t.kind)},
                                       {"dtype", dtypeName(t.ref.desc.dtype)},
                                       {"shape", std::move(shape)},
                                       {"offset", int64_t(at)},
                                       {"bytes", int64_t(bytes)}});
    at += bytes;
  }
  llvm::json::Array positions;
  for (uint64_t p : exec.randomPositions())
    positions.push_back(p);
  return llvm::json::Object{
      {"format", kFormat},
      {"step", completedSteps},
      {"model", exec.modelName()},
      {"source", exec.sourcePath()},
      {"fingerprint", modelFingerprint(exec)},
      {"world_size", size},
      {"batch", exec.batch()},
      {"algorithm", options.algorithm},
      {"optimizer", exec.optimizerName()},
      {"update_count", exec.updateCount()},
      {"seed", options.seed},
      {"data", llvm::json::Object{{"source", options.dataSource},
                                  {"ranks", std::move(dataStates)}}},
      {"rng", llvm::json::Object{{"dropout_positions", std::move(positions)}}},
      {"loss_scale",
       exec.scalesLoss() ? llvm::json::Value(llvm::json::Object{
                               {"scale", exec.lossScaler().scale},
                               {"good_steps", exec.lossScaler().goodSteps},
                               {"skipped", exec.lossScaler().skipped}})
                         : llvm::json::Value(nullptr)},
      {"blob",
       llvm::json::Object{{"file", "tensors.bin"},
                          {"bytes", int64_t(blob.size())},
                          {"xxh3", llvm::utohexstr(llvm::xxh3_64bits(blob),
                                                   /*LowerCase=*/true, 16)}}},
      {"tensors", std::move(table)},
      // Offsets in `tensors` are within one rank's copy; with one copy per
      // rank, rank r's starts at r * rank_bytes.
      {"per_rank", content.perRank},
      {"rank_bytes", int64_t(rankBytes)},
      {"algorithm_state",
       llvm::json::Object{{"offset", int64_t(algorithmOffset)},
                          {"floats", int64_t(content.algorithmState.size())}}},
      {"rank_state",
       llvm::json::Object{{"offset", int64_t(rankStateOffset)},
                          {"floats_per_rank", int64_t(rankStateFloats)}}}};
}

/// Rank 0: DIR/.tmp-step-N-PID filled and synced, renamed to DIR/step-N;
/// the newest --checkpoint-keep kept.
llvm::Error writeStepDirectory(const CheckpointOptions &options,
                               const std::string &name,
                               const llvm::SmallString<256> &final,
                               const std::string &blob,
                               llvm::json::Object manifest) {
  const std::string &dir = options.dir;
  if (std::error_code ec = fs::create_directories(dir))
    return makeError("--checkpoint=" + dir +
                     ": cannot create: " + ec.message());
  llvm::SmallString<256> tmp(dir);
  path::append(tmp, ".tmp-" + name + "-" + std::to_string(::getpid()));
  fs::remove_directories(tmp);
  if (std::error_code ec = fs::create_directory(tmp))
    return makeError(tmp + ": cannot create: " + ec.message());
  llvm::SmallString<256> manifestPath(tmp), blobPath(tmp);
  path::append(manifestPath, "manifest.json");
  path::append(blobPath, "tensors.bin");
  std::string text = formatJSON(std::move(manifest), 2) + "\n";
  // A write that fails (a full disk, say) leaves the older checkpoints as
  // they were: the error names the one to resume from.
  auto fail = [&](llvm::Error err) -> llvm::Error {
    fs::remove_directories(tmp);
    std::map<int64_t, std::string> older = listCheckpoints(dir);
    std::string resume =
        older.empty() ? "no older checkpoint is in " + dir
                      : "the older checkpoints are intact: the newest is " +
                            older.rbegin()->second + " (--resume=" + dir +
                            " continues from it)";
    return makeError("--checkpoint=" + dir + ": cannot write " + name + ": " +
                     llvm::toString(std::move(err)) + "; " + resume);
  };
  if (llvm::Error err = writeAndSync(blobPath, blob))
    return fail(std::move(err));
  if (llvm::Error err = writeAndSync(manifestPath, text))
    return fail(std::move(err));
  if (llvm::Error err = syncPath(tmp, /*directory=*/true))
    return fail(std::move(err));
  // A step directory already there (a resumed run passing the same step
  // again) is moved aside first: rename cannot replace a full directory.
  llvm::SmallString<256> aside(dir);
  path::append(aside, ".old-" + name + "-" + std::to_string(::getpid()));
  bool replaced = false;
  if (fs::exists(final)) {
    fs::remove_directories(aside);
    if (std::error_code ec = fs::rename(final, aside))
      return fail(makeError(
          final + ": cannot move the old checkpoint aside: " + ec.message()));
    replaced = true;
  }
  if (std::error_code ec = fs::rename(tmp, final))
    return fail(makeError(final + ": cannot rename " + tmp +
                          " into place: " + ec.message()));
  if (llvm::Error err = syncPath(dir, /*directory=*/true))
    return std::move(err);
  if (replaced)
    fs::remove_directories(aside);

  // Keep the newest K; leftovers of writes killed midway go too (rank 0 is
  // the only writer of DIR).
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef leaf = path::filename(it->path());
    if ((leaf.starts_with(".tmp-step-") || leaf.starts_with(".old-step-")) &&
        it->path() != tmp.str())
      fs::remove_directories(it->path());
  }
  if (options.keep > 0) {
    std::map<int64_t, std::string> all = listCheckpoints(dir);
    int64_t extra = int64_t(all.size()) - options.keep;
    for (auto it = all.begin(); extra > 0 && it != all.end(); ++it, --extra)
      fs::remove_directories(it->second);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::string> saveCheckpoint(Executor &exec, DataLoader &data,
                                           CommEngine &engine,
                                           const CheckpointOptions &options,
                                           int64_t completedSteps,
                                           const CheckpointContent &content) {
  const Executor &reader = exec;
  CheckpointBlob g = gatherCheckpoint(reader, data, engine, content);
  const std::string name = stepDirName(completedSteps);
  llvm::SmallString<256> final(options.dir);
  path::append(final, name);
  // The other ranks only know where it goes (rank 0 aborts the job if it
  // cannot write it).
  if (engine.communicator().rank() != 0)
    return final.str().str();
  auto manifest = checkpointManifest(exec, options, completedSteps, content,
                                     engine.communicator().size(), g);
  if (!manifest)
    return manifest.takeError();
  if (llvm::Error err = writeStepDirectory(options, name, final, g.blob,
                                           std::move(*manifest)))
    return std::move(err);
  return final.str().str();
}

llvm::Expected<std::string> findLatestCheckpoint(llvm::StringRef dir) {
  if (!fs::is_directory(dir))
    return makeError("--resume=" + dir + ": no such directory");
  llvm::SmallString<256> own(dir);
  path::append(own, "manifest.json");
  if (fs::exists(own))
    return dir.str();
  std::map<int64_t, std::string> all = listCheckpoints(dir);
  if (all.empty())
    return makeError("--resume=" + dir +
                     ": no complete checkpoint (a step-*/manifest.json) in it");
  return all.rbegin()->second;
}

//===----------------------------------------------------------------------===//
// Reading and restoring
//===----------------------------------------------------------------------===//

/// A checkpoint that cannot be used as written (unreadable, truncated,
/// corrupted), marked by its error code: --resume falls back past it.
static llvm::Error damaged(const llvm::Twine &message) {
  return llvm::createStringError(std::make_error_code(std::errc::bad_message),
                                 message);
}
static llvm::Error damaged(llvm::Error err) {
  return damaged(llvm::toString(std::move(err)));
}

static llvm::Expected<std::string> readWhole(llvm::StringRef p) {
  auto buffer = llvm::MemoryBuffer::getFile(p, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeError(p + ": cannot read: " + buffer.getError().message());
  return (*buffer)->getBuffer().str();
}

llvm::Expected<CheckpointBytes>
readCheckpoint(llvm::StringRef stepDir, Executor &exec, int worldSize,
               const CheckpointOptions &options) {
  CheckpointBytes bytes;
  bytes.path = stepDir.str();
  llvm::SmallString<256> manifestPath(stepDir), blobPath(stepDir);
  path::append(manifestPath, "manifest.json");
  path::append(blobPath, "tensors.bin");
  auto manifest = readWhole(manifestPath);
  if (!manifest)
    return damaged(manifest.takeError());
  bytes.manifest = std::move(*manifest);
  // Nesting bounded before parsing, as for every JSON file oasr reads.
  auto parsed = oasr::parseJSON(bytes.manifest, manifestPath);
  if (!parsed)
    return damaged(parsed.takeError());
  const llvm::json::Object *m = parsed->getAsObject();
  auto str = [&](llvm::StringRef key) {
    return m ? m->getString(key).value_or("").str() : std::string();
  };
  if (!m || str("format") != kFormat)
    return damaged(manifestPath + ": not an " + kFormat + " manifest");
  const std::string where = stepDir.str() + ": ";

  // The same model: name the first tensor that differs.
  if (str("fingerprint") != modelFingerprint(exec)) {
    std::string why;
    const llvm::json::Array *table = m->getArray("tensors");
    const auto &mine = exec.persistent();
    if (str("optimizer") != exec.optimizerName())
      why = "it was written with optimizer " + str("optimizer") +
            ", this run updates with " + exec.optimizerName();
    for (size_t k = 0; why.empty() && table && k < table->size(); ++k) {
      const llvm::json::Object *t = (*table)[k].getAsObject();
      std::string theirs;
      if (t) {
        std::string shape;
        if (const llvm::json::Array *s = t->getArray("shape"))
          for (const llvm::json::Value &d : *s)
            shape += (shape.empty() ? "" : "x") +
                     std::to_string(d.getAsInteger().value_or(-1));
        theirs = t->getString("kind").value_or("").str() + " " +
                 t->getString("name").value_or("").str() + " " +
                 t->getString("dtype").value_or("").str() + " [" + shape + "]";
      }
      if (k >= mine.size())
        why = "it holds " + theirs + ", which this model does not have";
      else if (theirs != tensorLine(mine[k]))
        why = "it holds " + theirs + " where this model has " +
              tensorLine(mine[k]);
    }
    if (why.empty() && table && table->size() < mine.size())
      why = "this model's " + tensorLine(mine[table->size()]) + " is not in it";
    return makeError(where + "checkpoint of another model (" +
                     (why.empty() ? "fingerprint differs" : why) + ")");
  }
  int64_t ranks = m->getInteger("world_size").value_or(-1);
  if (ranks < 1)
    return damaged(manifestPath + ": no world_size");
  if (ranks != worldSize && !options.allowResize)
    return makeError(llvm::formatv("{0}checkpoint written by {1} rank(s); "
                                   "this run has {2} (resume on as many ranks "
                                   "as wrote it, or pass --allow-resize to "
                                   "recut the data and go on with {2})",
                                   where, ranks, worldSize)
                         .str());
  if (str("algorithm") != options.algorithm)
    return makeError(where +
                     "checkpoint written by --algo=" + str("algorithm") +
                     "; this run has --algo=" + options.algorithm);
  const llvm::json::Object *data = m->getObject("data");
  std::string source =
      data ? data->getString("source").value_or("").str() : std::string();
  if (source != options.dataSource)
    return makeError(where + "checkpoint written with --data=" + source +
                     "; this run has --data=" + options.dataSource);
  std::optional<uint64_t> seed =
      m->get("seed") ? m->get("seed")->getAsUINT64() : std::nullopt;
  if (!seed || *seed != options.seed)
    return makeError(where + "checkpoint written with --seed=" +
                     (seed ? std::to_string(*seed) : std::string("?")) +
                     "; this run has --seed=" + std::to_string(options.seed));

  auto blob = readWhole(blobPath);
  if (!blob)
    return damaged(blob.takeError());
  bytes.blob = std::move(*blob);
  const llvm::json::Object *b = m->getObject("blob");
  int64_t want = b ? b->getInteger("bytes").value_or(-1) : -1;
  std::string sum = b ? b->getString("xxh3").value_or("").str() : "";
  if (want != int64_t(bytes.blob.size()))
    return damaged(llvm::formatv("{0}: {1} bytes, the manifest says {2}",
                                 blobPath, bytes.blob.size(), want)
                       .str());
  if (sum != llvm::utohexstr(llvm::xxh3_64bits(bytes.blob), true, 16))
    return damaged(blobPath + ": checksum differs from the manifest's "
                              "(corrupted)");
  return bytes;
}

llvm::Expected<ResumeChoice>
readNewestIntactCheckpoint(llvm::StringRef dir, Executor &exec, int worldSize,
                           const CheckpointOptions &options) {
  auto latest = findLatestCheckpoint(dir);
  if (!latest)
    return latest.takeError();
  // `dir` itself, or its step directories newest first.
  std::vector<std::string> candidates;
  if (*latest == dir.str()) {
    candidates.push_back(*latest);
  } else {
    std::map<int64_t, std::string> all = listCheckpoints(dir);
    for (auto it = all.rbegin(); it != all.rend(); ++it)
      candidates.push_back(it->second);
  }
  ResumeChoice choice;
  for (const std::string &c : candidates) {
    auto read = readCheckpoint(c, exec, worldSize, options);
    if (read) {
      choice.bytes = std::move(*read);
      return choice;
    }
    std::string message;
    bool isDamaged = false;
    llvm::handleAllErrors(read.takeError(), [&](const llvm::ErrorInfoBase &e) {
      message = e.message();
      isDamaged = e.convertToErrorCode() == std::errc::bad_message;
    });
    if (!isDamaged || candidates.size() == 1)
      return makeError(message);
    choice.skipped.push_back(c + " (" + message + ")");
  }
  std::string list;
  for (const std::string &s : choice.skipped)
    list += "\n  " + s;
  return makeError("--resume=" + dir + ": every checkpoint is damaged:" + list);
}

llvm::Expected<ResumeState> restoreCheckpoint(const CheckpointBytes &bytes,
                                              Executor &exec, DataLoader &data,
                                              int rank, int worldSize) {
  auto parsed = oasr::parseJSON(bytes.manifest, bytes.path);
  if (!parsed)
    return parsed.takeError();
  if (!parsed->getAsObject())
    return makeError(bytes.path + ": the manifest is not a JSON object");
  const llvm::json::Object &m = *parsed->getAsObject();
  const std::string where = bytes.path + ": ";
  ResumeState state;
  state.path = bytes.path;
  state.step = m.getInteger("step").value_or(0);
  state.worldSize = int(m.getInteger("world_size").value_or(0));
  state.batch = m.getInteger("batch").value_or(0);
  const bool resized = state.worldSize != worldSize;
  // A rank the writing run did not have starts from rank 0's copy.
  const int source = rank < state.worldSize ? rank : 0;

  const llvm::json::Array *table = m.getArray("tensors");
  auto &mine = exec.persistent();
  if (!table || table->size() != mine.size())
    return makeError(where + "tensor table does not fit the model");
  // This rank's copy when every rank has one.
  const int64_t base =
      m.getBoolean("per_rank").value_or(false)
          ? int64_t(source) * m.getInteger("rank_bytes").value_or(0)
          : 0;
  for (size_t k = 0; k < mine.size(); ++k) {
    const llvm::json::Object *t = (*table)[k].getAsObject();
    int64_t off = t ? t->getInteger("offset").value_or(-1) : -1;
    if (off >= 0)
      off += base;
    int64_t n = t ? t->getInteger("bytes").value_or(-1) : -1;
    if (off < 0 || n != int64_t(mine[k].ref.bytes()) ||
        uint64_t(off) + uint64_t(n) > bytes.blob.size())
      return makeError(where + "tensor '" + mine[k].name +
                       "' lies outside tensors.bin or has the wrong size");
    exec.backend().copyToDevice(mine[k].ref.data, bytes.blob.data() + off,
                                size_t(n));
  }
  exec.setUpdateCount(m.getInteger("update_count").value_or(0));
  // An f16 step's loss scaler resumes where it was.
  if (const llvm::json::Object *ls = m.getObject("loss_scale");
      ls && exec.scalesLoss()) {
    LossScaler &s = exec.lossScaler();
    s.scale = ls->getNumber("scale").value_or(s.scale);
    s.goodSteps = ls->getInteger("good_steps").value_or(0);
    s.skipped = ls->getInteger("skipped").value_or(0);
  }

  std::vector<uint64_t> positions;
  if (const llvm::json::Object *rng = m.getObject("rng"))
    if (const llvm::json::Array *a = rng->getArray("dropout_positions"))
      for (const llvm::json::Value &v : *a)
        positions.push_back(v.getAsUINT64().value_or(0));
  if (llvm::Error err = exec.setRandomPositions(positions))
    return makeError(where + llvm::toString(std::move(err)));

  if (const llvm::json::Object *a = m.getObject("algorithm_state")) {
    int64_t off = a->getInteger("offset").value_or(-1);
    int64_t n = a->getInteger("floats").value_or(-1);
    if (off < 0 || n < 0 ||
        uint64_t(off) + uint64_t(n) * sizeof(float) > bytes.blob.size())
      return makeError(where + "algorithm state lies outside tensors.bin");
    state.algorithmState.resize(size_t(n));
    if (n) // an empty state has no buffer to copy into
      std::memcpy(state.algorithmState.data(), bytes.blob.data() + off,
                  size_t(n) * sizeof(float));
  }

  if (const llvm::json::Object *a = m.getObject("rank_state")) {
    int64_t off = a->getInteger("offset").value_or(-1);
    int64_t n = a->getInteger("floats_per_rank").value_or(-1);
    if (off < 0 || n < 0 ||
        uint64_t(off) + uint64_t(source + 1) * uint64_t(n) * sizeof(float) >
            bytes.blob.size())
      return makeError(where + "rank " + std::to_string(source) +
                       "'s own state lies outside tensors.bin");
    state.rankState.assign(size_t(n), 0.0f);
    if (n && !resized)
      std::memcpy(state.rankState.data(),
                  bytes.blob.data() + off +
                      size_t(rank) * size_t(n) * sizeof(float),
                  size_t(n) * sizeof(float));
  }

  const llvm::json::Object *d = m.getObject("data");
  const llvm::json::Array *ranks = d ? d->getArray("ranks") : nullptr;
  if (!ranks || int(ranks->size()) != state.worldSize)
    return makeError(where + "the data positions are not one per rank");
  std::vector<std::string> dataStates;
  for (const llvm::json::Value &v : *ranks)
    dataStates.push_back(v.getAsString().value_or("").str());
  llvm::Error err = resized ? data.restoreResized(dataStates, rank)
                            : data.restoreState(dataStates[size_t(rank)]);
  if (err)
    return makeError(where + llvm::toString(std::move(err)));
  return state;
}

llvm::Expected<CheckpointShape> peekCheckpoint(llvm::StringRef dir) {
  auto latest = findLatestCheckpoint(dir);
  if (!latest)
    return latest.takeError();
  llvm::SmallString<256> manifestPath(*latest);
  path::append(manifestPath, "manifest.json");
  auto text = readWhole(manifestPath);
  if (!text)
    return text.takeError();
  auto parsed = oasr::parseJSON(*text, manifestPath);
  if (!parsed)
    return parsed.takeError();
  const llvm::json::Object *m = parsed->getAsObject();
  CheckpointShape shape;
  shape.path = *latest;
  if (m) {
    shape.worldSize = int(m->getInteger("world_size").value_or(0));
    shape.batch = m->getInteger("batch").value_or(0);
  }
  if (shape.worldSize < 1)
    return makeError(manifestPath + ": no world_size");
  return shape;
}

void broadcastCheckpoint(CheckpointBytes &bytes, CommEngine &engine) {
  if (engine.communicator().size() == 1)
    return;
  engine.run([&](Communicator &c) {
    uint64_t sizes[3] = {bytes.path.size(), bytes.manifest.size(),
                         bytes.blob.size()};
    c.broadcast(sizes, sizeof sizes, 0);
    bytes.path.resize(sizes[0]);
    bytes.manifest.resize(sizes[1]);
    bytes.blob.resize(sizes[2]);
    c.broadcast(bytes.path.data(), sizes[0], 0);
    c.broadcast(bytes.manifest.data(), sizes[1], 0);
    c.broadcast(bytes.blob.data(), sizes[2], 0);
  });
}

} // namespace oasr::rt
