//===- Compile.cpp - A model file to a training module, in process --------===//

#include "oasr/Compile/Compile.h"

#include "oasr/Passes/Passes.h"
#include "oasr/Schedule/Schedule.h"

#if OASR_HAVE_IMPORT
#include "oasr/Import/ONNXImporter.h"
#include "oasr/Import/ONNXModel.h"
#include "oasr/Import/ORTTraining.h"
#endif

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <cstdio>

#include <cstdlib>

using namespace mlir;
using namespace mlir::oasr;

bool TrainingCompileOptions::anyCompileOption() const {
  return !strategy.empty() || alpha >= 0 || beta >= 0 ||
         overlapRate.has_value() || !commFile.empty() || !profile.empty() ||
         !optimizer.empty() || momentum >= 0 || !dims.empty() ||
         !gradDtype.empty() || !compress.empty() || !precision.empty() ||
         !twoLevel.empty() || !fuseAttention || !trainable.empty() ||
         !freeze.empty() || weightDecay || epsilon || !betas.empty() ||
         decayExclude != "1d";
}

static llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

/// Adam's "B1,B2", each in [0, 1); none when malformed or empty.
static std::optional<std::pair<double, double>>
parseBetas(llvm::StringRef text) {
  auto [b1, b2] = text.split(',');
  double v1, v2;
  if (b1.getAsDouble(v1) || b2.getAsDouble(v2) || !(v1 >= 0 && v1 < 1) ||
      !(v2 >= 0 && v2 < 1))
    return std::nullopt;
  return std::make_pair(v1, v2);
}

/// `x` as %g writes it, for messages that repeat an option's value.
static std::string gNum(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

#if OASR_HAVE_IMPORT
/// The planning and precision options of an .onnx input, checked before
/// anything is imported.
static llvm::Error checkOnnxOptions(const TrainingCompileOptions &o) {
  if (o.weightDecay && !(std::isfinite(*o.weightDecay) && *o.weightDecay >= 0))
    return fail("--weight-decay=" + gNum(*o.weightDecay) +
                ": expected a finite decay >= 0");
  if (o.epsilon && !(std::isfinite(*o.epsilon) && *o.epsilon > 0))
    return fail("--eps=" + gNum(*o.epsilon) +
                ": expected a finite epsilon > 0");
  if (!o.betas.empty() && !parseBetas(o.betas))
    return fail("--betas=" + o.betas +
                ": expected B1,B2 with each in [0, 1) (0.9,0.999)");
  if (!o.betas.empty() || o.epsilon)
    if (o.optimizer != "adam" && o.optimizer != "adamw")
      return fail(std::string(o.betas.empty() ? "--eps" : "--betas") +
                  " applies to --optimizer=adam or adamw" +
                  (o.optimizer.empty() ? "" : ", not " + o.optimizer));
  if (o.overlapRate && !(*o.overlapRate >= 0 && *o.overlapRate <= 1))
    return fail("--overlap-rate must be in [0, 1] (the rate communication "
                "progresses while backward computes)");
  if (!o.gradDtype.empty())
    if (llvm::Expected<::oasr::schedule::WireDType> w =
            ::oasr::schedule::parseWireDType(o.gradDtype);
        !w) {
      llvm::consumeError(w.takeError());
      return fail("--grad-dtype=" + o.gradDtype +
                  ": expected f32, bf16 or f16 (the element type gradients "
                  "travel in)");
    }
  if (!o.compress.empty()) {
    if (llvm::Expected<::oasr::schedule::CompressPolicy> c =
            ::oasr::schedule::parseCompressPolicy(o.compress);
        !c)
      return fail("--compress=" + llvm::toString(c.takeError()));
    else if (!c->off() && o.gradDtype == "f16")
      return fail("--compress=" + o.compress +
                  ": PowerSGD's factors are not scaled, and P = M Q can "
                  "pass f16's range; send them in bf16 (--grad-dtype=bf16) "
                  "or f32");
    else if (!c->off() && o.precision == "f16")
      return fail("--compress=" + o.compress +
                  ": f16's loss scaler skips steps whose gradients "
                  "overflow, and PowerSGD's error feedback would keep the "
                  "overflow; use --precision=bf16");
  }
  if (!o.twoLevel.empty())
    if (llvm::Expected<::oasr::schedule::AllreduceRoute> r =
            ::oasr::schedule::parseAllreduceRoute(o.twoLevel);
        !r)
      return fail("--two-level=" + llvm::toString(r.takeError()));
  if (!o.precision.empty() && o.precision != "f32" && o.precision != "tf32" &&
      o.precision != "bf16" && o.precision != "f16")
    return fail("--precision=" + o.precision +
                ": expected f32, tf32, bf16 or f16 (docs/precision.md)");
  return llvm::Error::success();
}

/// The training pipeline's options `po`; `out` learns where the allreduce
/// model comes from.
static void setPipelineOptions(const TrainingCompileOptions &o,
                               CompiledTraining &out,
                               TrainPipelineOptions &po) {
  po.ignoreIndex = o.ignoreIndex;
  po.labelSmoothing = o.labelSmoothing;
  if (!o.strategy.empty())
    po.strategy = o.strategy;
  if (o.alpha >= 0)
    po.alpha = o.alpha;
  if (o.beta >= 0)
    po.beta = o.beta;
  if (!o.commFile.empty())
    po.comm = o.commFile;
  if (o.overlapRate)
    po.overlapRate = *o.overlapRate;
  if (!o.gradDtype.empty())
    po.gradDtype = o.gradDtype;
  if (!o.compress.empty())
    po.compress = o.compress;
  if (!o.twoLevel.empty())
    po.twoLevel = o.twoLevel;
  if (!o.profile.empty())
    po.profile = o.profile;
  if (!o.precision.empty())
    po.precision = o.precision;
  po.fuseAttention = o.fuseAttention;
  // No allreduce model given: the profile's, else the calibration
  // $OASR_COMM_CALIBRATION names, else the default for one host, announced
  // so nobody mistakes it for a measurement. (A profile that cannot be read
  // is reported by the pipeline, naming the file.)
  bool profileHasComm = false;
  if (!o.profile.empty()) {
    llvm::Expected<::oasr::schedule::Profile> p =
        ::oasr::schedule::readProfile(o.profile);
    if (p)
      profileHasComm = p->comm.has_value();
    else
      llvm::consumeError(p.takeError());
  }
  out.commSource = o.alpha >= 0 || o.beta >= 0 ? "--alpha/--beta"
                   : !o.commFile.empty()       ? "calibration " + o.commFile
                   : profileHasComm            ? "the profile's allreduce model"
                                               : "";
  if (o.alpha < 0 && o.beta < 0 && o.commFile.empty() && !profileHasComm) {
    if (const char *env = std::getenv("OASR_COMM_CALIBRATION")) {
      po.comm = std::string(env);
      out.commSource = "calibration " + std::string(env);
    } else {
      po.alpha = kDefaultAllreduceAlpha;
      po.beta = kDefaultAllreduceBeta;
      out.usedDefaultComm = true;
      out.commSource = "the default allreduce model";
    }
  }
  if (!o.optimizer.empty())
    po.algo = o.optimizer;
  if (o.momentum >= 0)
    po.momentum = o.momentum;
  if (o.lr >= 0)
    po.lr = o.lr;
  if (o.weightDecay)
    po.weightDecay = *o.weightDecay;
  if (o.epsilon)
    po.epsilon = *o.epsilon;
  if (auto b = parseBetas(o.betas)) {
    po.beta1 = b->first;
    po.beta2 = b->second;
  }
  po.decayExclude = o.decayExclude;
}
#endif

llvm::Expected<CompiledTraining>
mlir::oasr::compileForTraining(MLIRContext &ctx, llvm::StringRef path,
                               const TrainingCompileOptions &o) {
  std::string diags;
  std::vector<std::string> remarks;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Remark) {
      std::string text;
      llvm::raw_string_ostream os(text);
      // A node's name; the module's file location says nothing here.
      if (auto name = dyn_cast<NameLoc>(d.getLocation()))
        os << name.getName().getValue() << ": ";
      os << d.str();
      remarks.push_back(std::move(text));
      return success();
    }
    llvm::raw_string_ostream os(diags);
    if (!diags.empty())
      os << "\n";
    std::string loc;
    llvm::raw_string_ostream(loc) << d.getLocation();
    os << loc << ": " << d.str();
    return success();
  });
  auto failWithDiags = [&](const llvm::Twine &otherwise) {
    return fail(diags.empty() ? otherwise.str() : diags);
  };
  if (!llvm::sys::fs::exists(path))
    return fail(path + ": no such file");
  CompiledTraining out;
#if OASR_HAVE_IMPORT
  bool onnx = ::oasr::onnximport::ModelFile::isONNX(path);
#else
  bool onnx = llvm::sys::path::extension(path) == ".onnx";
#endif
  if (!onnx) {
    if (o.anyCompileOption())
      return fail("--strategy/--alpha/--beta/--overlap-rate/--comm/"
                  "--plan-profile/--grad-dtype/--compress/--two-level/"
                  "--precision/--optimizer/"
                  "--momentum/--trainable/--freeze/--weight-decay/"
                  "--decay-exclude/--betas/--eps/"
                  "--dim "
                  "apply to .onnx "
                  "inputs; a .mlir module carries its plan (recompile it with "
                  "oasr-opt)");
    // --batch is checked against the module after parsing.
    out.module = parseSourceFile<ModuleOp>(path, &ctx);
    if (!out.module)
      return failWithDiags(path + ": cannot parse");
    return std::move(out);
  }
#if OASR_HAVE_IMPORT
  ::oasr::onnximport::ImportOptions io;
  io.batch = o.batch;
  io.trainable = o.trainable;
  io.freeze = o.freeze;
  for (const std::string &d : o.dims) {
    std::string error;
    if (!::oasr::onnximport::parseDimOption(d, io, error))
      return fail("--dim=" + d + ": " + error);
  }
  if (llvm::Error err = checkOnnxOptions(o))
    return std::move(err);
  if (!o.allowInferenceGraph) {
    // A graph exported for inference imports fine and trains another
    // network: refuse it, naming the evidence and the fix.
    // (A file that does not load is reported by the import below; ONNX
    // Runtime's training graphs are training steps already.)
    auto model = ::oasr::onnximport::ModelFile::load(path);
    std::string why;
    if (!model)
      llvm::consumeError(model.takeError());
    else if (!::oasr::onnximport::isORTTrainingModel((*model)->proto()))
      why = ::oasr::onnximport::inferenceGraphReason((*model)->proto());
    if (!why.empty())
      return fail(path + ": an inference graph: " + why +
                  ". Training it would train a different network (no "
                  "normalisation). Export it for training with `python3 -m "
                  "oasr.export` or oasr.export(model, inputs, path) "
                  "(docs/pytorch.md), or torch.onnx.export(..., dynamo=False, "
                  "training=torch.onnx.TrainingMode.TRAINING); "
                  "--allow-inference-graph trains it as it is");
  }
  out.module = ::oasr::onnximport::importONNX(ctx, path, io);
  if (!out.module)
    return failWithDiags(path + ": cannot import");

  TrainPipelineOptions po;
  setPipelineOptions(o, out, po);
  PassManager pm(&ctx);
  populateTrainPipeline(pm, po);
  if (failed(pm.run(*out.module)))
    return failWithDiags(path + ": compilation failed");
  out.remarks = std::move(remarks);
  return std::move(out);
#else
  return fail(path + ": this build has no ONNX importer; compile the model "
                     "with `oasr-opt --oasr-train-pipeline` and pass the "
                     ".mlir");
#endif
}
