//===- Algorithms.cpp - Choosing a training algorithm ---------------------===//

#include "../TrainImpl.h"

namespace oasr::rt {

TrainingAlgorithm::~TrainingAlgorithm() = default;

//===----------------------------------------------------------------------===//
// Choosing an algorithm by name
//===----------------------------------------------------------------------===//

static const char *const kServerAlgorithms[] = {
    "async-sgd",    "async-msgd",    "hogwild-sgd",     "async-easgd",
    "async-measgd", "hogwild-easgd", "roundrobin-easgd"};

std::vector<std::string> trainingAlgorithmNames() {
  std::vector<std::string> names = {"sync-sgd", "sync-easgd"};
  names.insert(names.end(), std::begin(kServerAlgorithms),
               std::end(kServerAlgorithms));
  return names;
}

bool usesParameterServer(llvm::StringRef name) {
  return llvm::is_contained(kServerAlgorithms, name);
}

bool algorithmResizes(llvm::StringRef name) {
  return name == kSyncSGDName || name == "sync-easgd";
}

llvm::Error checkTrainingAlgorithm(llvm::StringRef name,
                                   const AlgorithmOptions &o,
                                   Communicator &comm, Executor *exec) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  const bool server = usesParameterServer(name);
  std::vector<std::string> names = trainingAlgorithmNames();
  if (!llvm::is_contained(names, name)) {
    std::string list;
    for (size_t k = 0; k < names.size(); ++k)
      list += (k == 0 ? "" : k + 1 == names.size() ? " or " : ", ") + names[k];
    return fail("--algo=" + name + ": expected " + list);
  }
  if (exec && anyCompressed(exec->groups())) {
    if (name != "sync-sgd")
      return fail("--compress: --algo=" + name +
                  " does not run the planned allreduces that PowerSGD "
                  "compresses (sync-sgd does)");
    if (!exec->backend().hostAddressable() && !comm.copiesDeviceGradients())
      return fail("--compress: PowerSGD runs on host memory, and the " +
                  llvm::Twine(exec->backend().name()) +
                  " backend's gradients are on the device, which the " +
                  comm.name() +
                  " communicator does not copy to the host (run on "
                  "several ranks, or use --device=cpu)");
  }
  if (o.compressStart < 0)
    return fail("--compress-start=" + llvm::Twine(o.compressStart) +
                ": must be >= 0");
  if (server)
    if (std::string why = comm.pointToPointUnavailable(); !why.empty())
      return fail("--algo=" + name + " exchanges with a parameter server: " +
                  why + " (run under mpirun, or with --np)");
  if (o.server != "shared" && o.server != "dedicated")
    return fail("--ps-server=" + o.server + ": expected shared or dedicated");
  if (o.server == "dedicated" && !server)
    return fail("--ps-server=dedicated: --algo=" + name +
                " has no parameter server (the async-* and hogwild-* "
                "algorithms do)");
  if (o.server == "dedicated" && comm.size() < 2)
    return fail("--ps-server=dedicated needs at least 2 ranks: the last one "
                "only serves");
  if ((name == "async-msgd" || name == "async-measgd") && exec &&
      llvm::none_of(exec->persistent(), [](const PersistentTensor &t) {
        return t.kind == PersistentTensor::OptState;
      }))
    return fail("--algo=" + name +
                ": the module's optimizer keeps no momentum (compile it with "
                "the momentum optimizer, or use --algo=" +
                (name == "async-msgd" ? "async-sgd" : "async-easgd") + ")");
  if (o.easgdTau < 1)
    return fail("--easgd-tau=" + llvm::Twine(o.easgdTau) + ": must be >= 1");
  return llvm::Error::success();
}

std::unique_ptr<TrainingAlgorithm>
createTrainingAlgorithm(llvm::StringRef name, Executor &exec,
                        CommEngine &engine, const AlgorithmOptions &o) {
  const int size = engine.communicator().size();
  if (usesParameterServer(name)) {
    ParameterServerOptions po;
    po.elastic = name.ends_with("easgd");
    po.hogwild = name.starts_with("hogwild");
    po.roundRobin = name == "roundrobin-easgd";
    po.dedicated = o.server == "dedicated";
    po.tau = o.easgdTau;
    // The elastic moving rate: beta = p * alpha = 0.9 over the p ranks that
    // train, as for sync-easgd.
    po.alpha = o.easgdAlpha > 0 ? o.easgdAlpha
                                : 0.9 / double(po.dedicated ? size - 1 : size);
    return createParameterServer(exec, engine, po, name.str());
  }
  if (name == "sync-easgd")
    // Default moving rate: beta = p * alpha = 0.9 (the paper's choice).
    return createSyncEASGD(exec, engine, o.easgdTau,
                           o.easgdAlpha > 0 ? o.easgdAlpha
                                            : 0.9 / double(size));
  return createSyncSGD(exec, engine, o.compressStart, o.seed);
}

} // namespace oasr::rt
