//===- ProgramIO.cpp - Programs in .oasrprog files ------------------------===//
//
// Program <-> the FlatBuffer of runtime/Program.fbs, field for field. The
// reader verifies the buffer (flatbuffers::Verifier) and every enum's
// range; Executor::create then checks that the indices hold together.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/ProgramIO.h"

#include "Program_generated.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace fb = flatbuffers;
namespace pf = oasr::progfbs;

namespace oasr::rt {

namespace {

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

class Writer {
public:
  std::string write(const Program &p) { return finish(p); }

private:
  fb::Offset<fb::String> str(const std::string &s) { return b.CreateString(s); }
  template <typename T, typename F>
  auto vec(const std::vector<T> &items, F &&make) {
    std::vector<decltype(make(items.front()))> out;
    out.reserve(items.size());
    for (const T &item : items)
      out.push_back(make(item));
    return b.CreateVector(out);
  }
  fb::Offset<pf::Desc> desc(const TensorDesc &d) {
    return pf::CreateDesc(b, uint8_t(d.dtype), b.CreateVector(d.shape));
  }
  fb::Offset<pf::Attr> attr(const std::string &name, const AttrValue &v) {
    auto n = str(name);
    fb::Offset<fb::String> s;
    fb::Offset<fb::Vector<int64_t>> ints;
    fb::Offset<fb::Vector<double>> floats;
    fb::Offset<fb::Vector<fb::Offset<fb::String>>> strings;
    if (auto *x = std::get_if<std::string>(&v))
      s = str(*x);
    if (auto *x = std::get_if<std::vector<int64_t>>(&v))
      ints = b.CreateVector(*x);
    if (auto *x = std::get_if<std::vector<double>>(&v))
      floats = b.CreateVector(*x);
    if (auto *x = std::get_if<std::vector<std::string>>(&v))
      strings = b.CreateVectorOfStrings(*x);
    const int64_t *i = std::get_if<int64_t>(&v);
    const double *f = std::get_if<double>(&v);
    return pf::CreateAttr(b, n, uint8_t(v.index()), i ? *i : 0, f ? *f : 0.0, s,
                          ints, floats, strings);
  }
  fb::Offset<pf::Instr> instr(const ProgramInstr &in) {
    std::vector<pf::CopyPair> copies;
    for (auto [dst, src] : in.copies)
      copies.emplace_back(dst, src);
    std::vector<fb::Offset<pf::Attr>> attrs;
    for (const auto &[name, v] : in.attrs.all())
      attrs.push_back(attr(name, v));
    const UpdateRule &r = in.rule;
    auto rule = pf::CreateRule(b, str(r.algo), r.lr, r.momentum, r.weightDecay,
                               r.dampening, r.lrDecay, r.beta1, r.beta2,
                               r.epsilon, r.weightDecayPost, r.nesterov);
    return pf::CreateInstr(
        b, uint8_t(in.op), b.CreateVector(in.ins), b.CreateVector(in.outs),
        in.group, b.CreateVectorOfStructs(copies), rule, in.elementwise,
        in.pack, b.CreateVector(in.absent), str(in.opType), str(in.name),
        str(in.location), b.CreateVector(attrs), in.paramCopy);
  }
  fb::Offset<pf::Group> group(const ProgramGroup &g) {
    std::vector<uint64_t> offsets(g.offsets.begin(), g.offsets.end());
    std::vector<pf::Slot> slots;
    for (const GradSlot &s : g.slots)
      slots.emplace_back(s.slot, s.wait, s.readyInstr);
    return pf::CreateGroup(
        b, g.index, b.CreateVector(g.grads), b.CreateVector(offsets),
        b.CreateVectorOfStrings(g.gradLayers), g.bytes, g.powerSgdRank,
        str(g.layer), b.CreateVectorOfStructs(slots), g.twoLevel);
  }

  std::string finish(const Program &p) {
    auto values = vec(p.values, [&](const ValueInfo &v) {
      return pf::CreateValue(b, desc(v.desc), uint8_t(v.where), v.aliasOf,
                             v.persistent, v.group, v.offset, v.def, v.used,
                             v.kernelOutput);
    });
    auto persist = vec(p.persist, [&](const PersistBuf &x) {
      return pf::CreatePersist(
          b, desc(x.desc),
          b.CreateVector(reinterpret_cast<const uint8_t *>(x.init.data()),
                         x.init.size()));
    });
    auto instrs =
        vec(p.instrs, [&](const ProgramInstr &in) { return instr(in); });
    auto steps = vec(p.steps, [&](const PlanStepInfo &s) {
      return pf::CreateStep(b, str(s.name), str(s.opType), str(s.layer),
                            uint8_t(s.kind));
    });
    auto tensors = vec(p.tensors, [&](const ProgramTensor &t) {
      return pf::CreateTensor(b, uint8_t(t.kind), str(t.name), t.value,
                              uint8_t(t.init), t.fanIn);
    });
    std::vector<fb::Offset<pf::GradOfParam>> gop;
    for (const auto &[name, v] : p.gradOfParam)
      gop.push_back(pf::CreateGradOfParam(b, str(name), v));
    auto gradOfParam = b.CreateVector(gop);
    auto groups =
        vec(p.groups, [&](const ProgramGroup &g) { return group(g); });
    auto gradients = vec(p.gradients, [&](const ProgramGradient &g) {
      return pf::CreateGradient(b, g.at.first, g.at.second, str(g.param),
                                str(g.layer), g.bytes, g.rows);
    });
    std::vector<pf::Unit> order;
    for (const SteadyExecution::Unit &u : p.steady.order)
      order.emplace_back(u.group, u.piece, u.gather);
    auto steady = pf::CreateSteady(
        b, p.steady.forwardWaits,
        b.CreateVector(std::vector<uint32_t>(p.steady.pieces.begin(),
                                             p.steady.pieces.end())),
        b.CreateVector(p.steady.scatter), b.CreateVectorOfStructs(order));
    auto root = pf::CreateProgram(
        b, kProgramVersion, str(p.source), str(p.model), str(p.precision),
        str(p.countName), str(p.strategy), str(p.costs), p.updatesDone,
        p.rebatchedFrom, p.predictedUs, p.alphaS, p.betaS, p.groupOverheadUs,
        p.overlapRate, uint8_t(p.wire), steady, values, persist, instrs, steps,
        p.inputValue, p.labelValue, p.lossValue, p.scoresValue,
        p.lossScaleValue, p.inputVocab, p.forwardEnd, tensors, gradOfParam,
        groups, gradients,
        pf::CreateTier(b, p.tier.ranks, p.tier.ranksPerNode, p.tier.intraAlphaS,
                       p.tier.intraBetaS, p.tier.interAlphaS,
                       p.tier.interBetaS),
        p.compressUsPerMac, p.compressUsPerElement, str(p.compress));
    pf::FinishProgramBuffer(b, root);
    return std::string(reinterpret_cast<const char *>(b.GetBufferPointer()),
                       b.GetSize());
  }

  fb::FlatBufferBuilder b{1 << 16};
};

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

class Reader {
public:
  explicit Reader(std::string &why) : why(why) {}

  bool read(const pf::Program &f, Program &p) {
    p.source = str(f.source());
    p.model = str(f.model());
    p.precision = str(f.precision());
    p.countName = str(f.count_name());
    p.strategy = str(f.strategy());
    p.costs = str(f.costs());
    p.updatesDone = f.updates_done();
    p.rebatchedFrom = f.rebatched_from();
    p.predictedUs = f.predicted_us();
    p.alphaS = f.alpha_s();
    p.betaS = f.beta_s();
    p.groupOverheadUs = f.group_overhead_us();
    p.overlapRate = f.overlap_rate();
    p.compressUsPerMac = f.compress_us_per_mac();
    p.compressUsPerElement = f.compress_us_per_element();
    p.compress = str(f.compress());
    if (const pf::Tier *t = f.tier())
      p.tier = {t->ranks(),        t->ranks_per_node(), t->intra_alpha_s(),
                t->intra_beta_s(), t->inter_alpha_s(),  t->inter_beta_s()};
    if (!enumIn(f.wire(), 2, "gradient wire", p.wire))
      return false;
    if (const pf::Steady *st = f.steady()) {
      p.steady.forwardWaits = st->forward_waits();
      p.steady.pieces = list<unsigned>(st->pieces());
      p.steady.scatter = list<uint8_t>(st->scatter());
      if (st->order())
        for (const pf::Unit *u : *st->order())
          p.steady.order.push_back({u->group(), u->piece(), u->gather()});
    }
    p.inputValue = f.input_value();
    p.labelValue = f.label_value();
    p.lossValue = f.loss_value();
    p.scoresValue = f.scores_value();
    p.lossScaleValue = f.loss_scale_value();
    p.inputVocab = f.input_vocab();
    p.forwardEnd = f.forward_end();
    if (f.grad_of_param())
      for (const pf::GradOfParam *g : *f.grad_of_param())
        p.gradOfParam[str(g->param())] = g->value();
    if (f.gradients())
      for (const pf::Gradient *g : *f.gradients())
        p.gradients.push_back({{g->group(), g->position()},
                               str(g->param()),
                               str(g->layer()),
                               size_t(g->bytes()),
                               g->rows()});
    return values(f, p) && instrs(f, p) && groupsAndTensors(f, p);
  }

private:
  static std::string str(const fb::String *s) {
    return s ? s->str() : std::string();
  }
  template <typename T, typename V> static std::vector<T> list(const V *v) {
    return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>{};
  }
  /// `raw` as enum `E` when it is at most `last`.
  template <typename E>
  bool enumIn(uint8_t raw, uint8_t last, const char *what, E &out) {
    if (raw > last) {
      why = llvm::formatv("{0} {1} is not one this build knows", what, raw);
      return false;
    }
    out = E(raw);
    return true;
  }
  bool desc(const pf::Desc *d, TensorDesc &out) {
    if (!d) {
      why = "a tensor has no type";
      return false;
    }
    out.shape = list<int64_t>(d->shape());
    return enumIn(d->dtype(), uint8_t(DType::BF16), "element type", out.dtype);
  }
  bool values(const pf::Program &f, Program &p) {
    if (f.values())
      for (const pf::Value *v : *f.values()) {
        ValueInfo vi;
        if (!desc(v->desc(), vi.desc) ||
            !enumIn(v->where(), uint8_t(Where::Alias), "storage", vi.where))
          return false;
        vi.aliasOf = v->alias_of();
        vi.persistent = v->persistent();
        vi.group = v->group();
        vi.offset = size_t(v->offset());
        vi.def = v->def();
        vi.used = v->used();
        vi.kernelOutput = v->kernel_output();
        p.values.push_back(std::move(vi));
      }
    if (f.persist())
      for (const pf::Persist *x : *f.persist()) {
        PersistBuf pb;
        if (!desc(x->desc(), pb.desc))
          return false;
        if (x->init())
          pb.init.assign(x->init()->begin(), x->init()->end());
        p.persist.push_back(std::move(pb));
      }
    return true;
  }
  bool attrs(const pf::Instr &in, AttrMap &out) {
    if (!in.attrs())
      return true;
    for (const pf::Attr *a : *in.attrs()) {
      AttrValue v;
      switch (a->kind()) {
      case 0:
        v = a->i();
        break;
      case 1:
        v = a->f();
        break;
      case 2:
        v = str(a->s());
        break;
      case 3:
        v = list<int64_t>(a->ints());
        break;
      case 4:
        v = list<double>(a->floats());
        break;
      case 5: {
        std::vector<std::string> strings;
        if (a->strings())
          for (const fb::String *s : *a->strings())
            strings.push_back(s->str());
        v = std::move(strings);
        break;
      }
      default:
        why = llvm::formatv("attribute '{0}' has kind {1}, not one this "
                            "build knows",
                            str(a->name()), a->kind());
        return false;
      }
      out.set(str(a->name()), std::move(v));
    }
    return true;
  }
  bool instrs(const pf::Program &f, Program &p) {
    if (f.instrs())
      for (const pf::Instr *in : *f.instrs()) {
        ProgramInstr pi;
        if (!enumIn(in->op(), uint8_t(InstrOp::Update), "instruction kind",
                    pi.op) ||
            !attrs(*in, pi.attrs))
          return false;
        pi.ins = list<int>(in->ins());
        pi.outs = list<int>(in->outs());
        pi.group = in->group();
        if (in->copies())
          for (const pf::CopyPair *c : *in->copies())
            pi.copies.push_back({c->dst(), c->src()});
        if (const pf::Rule *r = in->rule())
          pi.rule = UpdateRule{str(r->algo()), r->lr(),
                               r->momentum(),  r->weight_decay(),
                               r->dampening(), r->lr_decay(),
                               r->beta1(),     r->beta2(),
                               r->epsilon(),   r->weight_decay_post(),
                               r->nesterov()};
        pi.elementwise = in->elementwise();
        pi.pack = in->pack();
        pi.absent = list<int64_t>(in->absent());
        pi.opType = str(in->op_type());
        pi.name = str(in->name());
        pi.location = str(in->location());
        pi.paramCopy = in->param_copy();
        p.instrs.push_back(std::move(pi));
      }
    if (f.steps())
      for (const pf::Step *s : *f.steps()) {
        PlanStepInfo info{str(s->name()), str(s->op_type()), str(s->layer()),
                          StepKind::Forward};
        if (!enumIn(s->kind(), uint8_t(StepKind::Copy), "step kind", info.kind))
          return false;
        p.steps.push_back(std::move(info));
      }
    return true;
  }
  bool groupsAndTensors(const pf::Program &f, Program &p) {
    if (f.groups())
      for (const pf::Group *g : *f.groups()) {
        ProgramGroup pg;
        pg.index = g->index();
        pg.grads = list<int>(g->grads());
        pg.offsets = list<size_t>(g->offsets());
        if (g->grad_layers())
          for (const fb::String *s : *g->grad_layers())
            pg.gradLayers.push_back(s->str());
        pg.bytes = size_t(g->bytes());
        pg.powerSgdRank = g->power_sgd_rank();
        pg.twoLevel = g->two_level();
        pg.layer = str(g->layer());
        if (g->slots())
          for (const pf::Slot *s : *g->slots())
            pg.slots.push_back({s->slot(), s->wait(), s->ready_instr()});
        p.groups.push_back(std::move(pg));
      }
    if (f.tensors())
      for (const pf::Tensor *t : *f.tensors()) {
        ProgramTensor pt;
        if (!enumIn(t->kind(), uint8_t(PersistentTensor::OptState),
                    "tensor kind", pt.kind) ||
            !enumIn(t->init(), uint8_t(PersistentTensor::Ones), "tensor init",
                    pt.init))
          return false;
        pt.name = str(t->name());
        pt.value = t->value();
        pt.fanIn = t->fan_in();
        p.tensors.push_back(std::move(pt));
      }
    return true;
  }

  std::string &why;
};

} // namespace

std::string serializeProgram(const Program &program) {
  return Writer().write(program);
}

llvm::Expected<Program> deserializeProgram(llvm::StringRef bytes,
                                           llvm::StringRef name) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   name + ": " + why);
  };
  const auto *base = reinterpret_cast<const uint8_t *>(bytes.data());
  if (bytes.size() < 8 || !pf::ProgramBufferHasIdentifier(base))
    return fail("not an oasr program (no \"OASP\" file identifier); "
                "compile one with oasr-run --compile-only=FILE");
  // A large model's program holds one table per value and instruction.
  fb::Verifier verifier(base, bytes.size(), /*max_depth=*/64,
                        /*max_tables=*/100000000);
  if (!pf::VerifyProgramBuffer(verifier))
    return fail("the program is damaged (its FlatBuffer does not verify)");
  const pf::Program *f = pf::GetProgram(base);
  if (f->version() != kProgramVersion)
    return fail(llvm::formatv("program format version {0}; this oasr reads "
                              "version {1}: compile the model again",
                              f->version(), kProgramVersion));
  Program program;
  std::string why;
  if (!Reader(why).read(*f, program))
    return fail("the program is damaged: " + why);
  return program;
}

llvm::Error writeProgram(const Program &program, llvm::StringRef path) {
  std::string bytes = serializeProgram(program);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (!ec) {
    os.write(bytes.data(), bytes.size());
    os.close();
    ec = os.error();
  }
  if (ec)
    return llvm::createStringError(ec, "%s: cannot write: %s",
                                   path.str().c_str(), ec.message().c_str());
  return llvm::Error::success();
}

llvm::Expected<Program> readProgram(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "%s: cannot read: %s",
                                   path.str().c_str(),
                                   buffer.getError().message().c_str());
  return deserializeProgram((*buffer)->getBuffer(), path);
}

bool isProgramFile(llvm::StringRef path) {
  return llvm::sys::path::extension(path) == ".oasrprog";
}

} // namespace oasr::rt
