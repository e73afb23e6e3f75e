#!/usr/bin/python3
"""ONNX Runtime training artifacts for oasr's importer, and ORT's own
training step as the reference.

Run with the interpreter of the ORT virtual environment that
scripts/setup.sh makes (/root/venv-ort or $OASR_ORT_VENV: Debian's python3
with --system-site-packages for torch and onnx, plus PyPI's
onnxruntime-training):

  ort_artifacts.py list
  ort_artifacts.py export NAME DIR [--batch N] [--seed S] [--weight-decay W]
      Builds the small model with seeded weights, exports it to ONNX
      (DIR/forward.onnx, training mode, as a user would), and calls
      onnxruntime.training.artifacts.generate_artifacts on it (loss
      CrossEntropyLoss, optimizer AdamW): DIR/training_model.onnx,
      eval_model.onnx, optimizer_model.onnx, checkpoint. Then converts the
      checkpoint with ORT's own API (CheckpointState) into
      DIR/training_model.ckpt.onnx: the training model with every
      parameter's and every non-trainable state's value as an initializer
      of the same name as the graph input. Writes one batch for
      `oasr-run --data=mnist:DIR/data`.
  ort_artifacts.py fold DIR
      Only the checkpoint conversion, for artifacts made elsewhere. oasr
      reads DIR/checkpoint itself (`oasr-run DIR/training_model.onnx`); the
      folded model is the cross-check of that native read.
  ort_artifacts.py checkpoint SAVED.onnx DIR OUT
      The other way: DIR/checkpoint with the parameters replaced by the
      initializers of SAVED.onnx (what oasr-run --save wrote), written with
      ORT's CheckpointState.save_checkpoint, for ORT to go on from. (The
      optimizer's moments are not carried; `oasr-run --save-ort=OUT` writes
      them natively.)
  ort_artifacts.py text FILE.onnx OUT.txtpb
      Writes a model as a text ModelProto (the committed test inputs).
  ort_artifacts.py ops FILE.onnx
      Prints the op types (domain::op) of the graph, one a line, with counts.
  ort_artifacts.py data NAME OUT [--samples N] [--seed S]
      Writes N samples of NAME's input shape as IDX files (for several
      ranks: each rank trains on its shard).
  ort_artifacts.py step DIR OUT.npz [--steps K] [--data D] [--update-last]
                    [--checkpoint CKPT] [--save-checkpoint OUT]
      Runs ORT's training step (Module's forward + backward) on the batch of
      DIR/data (the same batch every step), K steps (default 1) with ORT's
      AdamW optimizer model between them, and writes NAME.grad (the
      gradients of the last step), NAME.value (the parameters before the
      last step's update, or after it with --update-last) and `loss`. With
      --data D holding several batches, one step's gradient is the mean
      over its batches (what equal shards on several ranks allreduce to).
      --checkpoint starts from another checkpoint than DIR/checkpoint (with
      its AdamW moments and step, when it has them); --save-checkpoint
      writes ORT's state after the steps, optimizer state included.
  ort_artifacts.py torch NAME DATA OUT.npz [--seed S]
      PyTorch's float64 gradients of NAME (built as `export` builds it) on
      the batch in DATA: the exact reference both float32 runs approach.
  ort_artifacts.py compare A B [--tol T] [--values] [--no-loss]
      Compares the gradients (or with --values the parameter values) of two
      dumps (oasr-run --dump-grads .npz/.json, `step`'s .npz, or with
      --values a training model oasr-run --save wrote or an ORT
      checkpoint) per
      parameter, normwise: err = ||a - b|| / ||b|| <= T (default 1e-4);
      where ||b|| is below 1e-5 of the largest norm (a gradient zero in
      exact arithmetic, such as a convolution's bias before BatchNorm),
      against that largest norm instead. Exits 1 when any parameter differs
      or is missing on one side.
"""
import argparse
import json
import os
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")
os.environ.setdefault("ORT_LOGGING_LEVEL", "3")

CLASSES = 10


# ---------------------------------------------------------------------------
# Models (torch is imported lazily: `compare` needs numpy only)
# ---------------------------------------------------------------------------

def models():
    import torch
    import torch.nn as nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(64, 32)
            self.fc2 = nn.Linear(32, 24)
            self.fc3 = nn.Linear(24, CLASSES)

        def forward(self, x):
            x = torch.flatten(x, 1)
            return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(16)
            self.fc = nn.Linear(16, CLASSES)

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            x = nn.functional.max_pool2d(x, 2)
            x = torch.relu(self.bn2(self.conv2(x)))
            x = nn.functional.adaptive_avg_pool2d(x, 1)
            return self.fc(torch.flatten(x, 1))

    class Encoder(nn.Module):
        """A sequence of 8 tokens of 12 features (one 8x12 'image' row per
        token), one post-norm encoder layer with GELU, mean over tokens."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(12, 16)
            self.layer = nn.TransformerEncoderLayer(
                16, 2, dim_feedforward=32, dropout=0.0, activation="gelu",
                batch_first=True)
            self.head = nn.Linear(16, CLASSES)

        def forward(self, x):
            h = self.layer(self.embed(x.reshape(x.shape[0], 8, 12)))
            return self.head(h.mean(dim=1))

    class Tiny(nn.Module):
        """The CNN's op mix at a size whose training model fits a readable
        text ModelProto (test/Import/Inputs/ort_tiny)."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3, padding=1)
            self.bn = nn.BatchNorm2d(2)
            self.fc = nn.Linear(8, 3)

        def forward(self, x):
            x = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
            return self.fc(torch.flatten(x, 1))

    def torchvision(arch):
        def make():
            import torchvision.models as tvm
            return getattr(tvm, arch)(num_classes=CLASSES)
        return make

    return {
        "resnet18": (torchvision("resnet18"), (3, 64, 64)),
        "resnet50": (torchvision("resnet50"), (3, 64, 64)),
        "mobilenet_v2": (torchvision("mobilenet_v2"), (3, 64, 64)),
        "googlenet": (torchvision("googlenet"), (3, 64, 64)),
        "tiny": (Tiny, (1, 4, 4)),
        "mlp": (MLP, (1, 8, 8)),
        "cnn": (CNN, (3, 8, 8)),
        "transformer": (Encoder, (8, 12)),
    }


NAMES = ["mlp", "cnn", "transformer", "tiny", "resnet18", "resnet50",
         "mobilenet_v2", "googlenet"]


def build(name, seed):
    import torch
    torch.manual_seed(seed)
    cls, shape = models()[name]
    model = cls()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model, shape


# ---------------------------------------------------------------------------
# Data: IDX files as oasr-run's mnist:DIR reads them
# ---------------------------------------------------------------------------

def idx_io():
    """write_idx/read_idx of model_zoo.py (same directory; imports torch)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import model_zoo
    return model_zoo.write_idx, model_zoo.read_idx


def load_batch(d):
    _, read_idx = idx_io()
    x = read_idx(os.path.join(d, "train-images-idx3-ubyte")).astype(np.float32)
    y = read_idx(os.path.join(d, "train-labels-idx1-ubyte")).astype(np.int64)
    return x, y


# ---------------------------------------------------------------------------
# Artifacts
# ---------------------------------------------------------------------------

def write_batch(d, shape, samples, seed):
    write_idx, _ = idx_io()
    rng = np.random.RandomState(seed)
    x = rng.standard_normal((samples,) + tuple(shape)).astype(np.float32)
    y = rng.randint(0, CLASSES, size=samples)
    os.makedirs(d, exist_ok=True)
    write_idx(os.path.join(d, "train-images-idx3-ubyte"), x, 0x0D)
    write_idx(os.path.join(d, "train-labels-idx1-ubyte"), y, 0x08)


def cmd_data(a):
    write_batch(a.out, models()[a.model][1], a.samples, a.seed)
    print(f"mnist:{a.out}")


def cmd_export(a):
    import onnx
    import torch
    from onnxruntime.training import artifacts

    model, shape = build(a.model, a.seed)
    model.train()
    os.makedirs(a.dir, exist_ok=True)
    data = os.path.join(a.dir, "data")
    write_batch(data, shape, a.batch, a.seed + 1)
    x, _ = load_batch(data)

    forward = os.path.join(a.dir, "forward.onnx")
    torch.onnx.export(model, torch.from_numpy(x), forward,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17,
                      input_names=["input"], output_names=["output"])
    trainable = [n for n, _ in model.named_parameters()]
    exported = onnx.load(forward)
    with_layer_norm_statistics(exported)
    optimizer = artifacts.OptimType.AdamW
    if a.weight_decay:
        from onnxruntime.training import onnxblock
        optimizer = onnxblock.optim.AdamW(weight_decay=a.weight_decay)
    artifacts.generate_artifacts(
        exported, requires_grad=trainable, frozen_params=[],
        loss=artifacts.LossType.CrossEntropyLoss,
        optimizer=optimizer, artifact_directory=a.dir)
    fold(a.dir)
    print(f"wrote {a.dir}: training_model.onnx, eval_model.onnx, "
          f"optimizer_model.onnx, checkpoint, training_model.ckpt.onnx, data/")


def with_layer_norm_statistics(model):
    """PyTorch writes LayerNormalization-17 with its one required output;
    ORT's gradient builder for it reads the optional Mean and InvStdDev
    outputs and fails without them ('i < node_->OutputDefs().size()'), so
    they are named here, as a user must."""
    for n in model.graph.node:
        if n.op_type == "LayerNormalization" and len(n.output) == 1:
            n.output.extend([n.output[0] + "_mean", n.output[0] + "_inv_std"])


def checkpoint_values(d):
    """{name: numpy array} of every tensor in DIR/checkpoint, through ORT's
    CheckpointState (trainable and non-trainable parameters alike)."""
    from onnxruntime.training.api import CheckpointState
    state = CheckpointState.load_checkpoint(os.path.join(d, "checkpoint"))
    return {name: np.array(p.data) for name, p in state.parameters}


def fold(d):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(os.path.join(d, "training_model.onnx"))
    values = checkpoint_values(d)
    have = {t.name for t in model.graph.initializer}
    inputs = {i.name for i in model.graph.input}
    for name, value in values.items():
        if name in have:
            continue
        if name not in inputs:
            sys.exit(f"{d}/checkpoint: '{name}' is not a graph input of "
                     f"training_model.onnx")
        model.graph.initializer.append(numpy_helper.from_array(value, name))
    onnx.save(model, os.path.join(d, "training_model.ckpt.onnx"))


def cmd_checkpoint(a):
    """The trained values of a model oasr-run --save wrote, as an ORT
    checkpoint (DIR/checkpoint with those parameters replaced)."""
    import onnx
    from onnx import numpy_helper
    from onnxruntime.training import api
    state = api.CheckpointState.load_checkpoint(os.path.join(a.dir, "checkpoint"))
    # ORT 1.19 crashes setting a parameter of a state no Module holds.
    module = api.Module(os.path.join(a.dir, "training_model.onnx"), state,
                        None, device="cpu")
    trained = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(a.saved).graph.initializer}
    replaced = 0
    for name, p in state.parameters:
        if name in trained:
            if trained[name].shape != np.array(p.data).shape:
                sys.exit(f"{a.saved}: '{name}' has shape {trained[name].shape}, "
                         f"the checkpoint {np.array(p.data).shape}")
            state.parameters[name] = np.ascontiguousarray(trained[name])
            replaced += 1
    api.CheckpointState.save_checkpoint(state, a.out)
    del module
    print(f"wrote {a.out} ({replaced} parameters from {a.saved})")


def cmd_fold(a):
    fold(a.dir)
    print(f"wrote {a.dir}/training_model.ckpt.onnx")


def cmd_text(a):
    """Writes a binary ModelProto as a text ModelProto (for test inputs)."""
    import onnx
    from google.protobuf import text_format
    model = onnx.load(a.file)
    with open(a.out, "w") as f:
        f.write(text_format.MessageToString(model))


def cmd_ops(a):
    import onnx
    model = onnx.load(a.file, load_external_data=False)
    counts = {}
    for n in model.graph.node:
        key = f"{n.domain or 'ai.onnx'}::{n.op_type}"
        counts[key] = counts.get(key, 0) + 1
    for key in sorted(counts):
        print(f"{key} {counts[key]}")


# ---------------------------------------------------------------------------
# ORT's own training step
# ---------------------------------------------------------------------------

def cmd_step(a):
    from onnxruntime.training import api
    state = api.CheckpointState.load_checkpoint(
        a.checkpoint or os.path.join(a.dir, "checkpoint"))
    # No eval model: ORT cannot load the eval_model.onnx it writes for a
    # model with BatchNormalization ('number of op outputs should be 1 when
    # Training_mode = False'), and the training step does not need it.
    module = api.Module(os.path.join(a.dir, "training_model.onnx"), state,
                        None, device="cpu")
    optimizer = api.Optimizer(os.path.join(a.dir, "optimizer_model.onnx"), module)
    if a.lr is not None:
        optimizer.set_learning_rate(a.lr)
    x, y = load_batch(a.data or os.path.join(a.dir, "data"))
    shape = module_input_shape(a.dir, x)
    batch = shape[0]
    if x.shape[0] % batch:
        sys.exit(f"{x.shape[0]} samples are not a multiple of the batch {batch}")
    chunks = x.shape[0] // batch
    module.train()
    for step in range(a.steps):
        # Several batches (the data of several ranks): ORT accumulates their
        # gradients; their mean is what an allreduce of equal shards gives.
        module.lazy_reset_grad()
        losses = []
        for c in range(chunks):
            part = slice(c * batch, (c + 1) * batch)
            losses.append(float(module(x[part].reshape(shape), y[part])))
        loss = np.mean(losses)
        grads = {n: np.array(p.grad) / chunks for n, p in state.parameters
                 if p.requires_grad}
        if step + 1 < a.steps or a.update_last:
            if chunks != 1:
                sys.exit("several batches per step only with --steps 1")
            optimizer.step()
    if a.save_checkpoint:
        api.CheckpointState.save_checkpoint(state, a.save_checkpoint,
                                            include_optimizer_state=True)
    out = {"loss": np.asarray(loss, dtype=np.float32)}
    for n, p in state.parameters:
        if p.requires_grad:
            out[n + ".grad"] = grads[n]
            out[n + ".value"] = np.array(p.data)
    np.savez(a.out, **out)
    print(f"ort: loss {float(loss):.7g}, {len(grads)} gradients, "
          f"{chunks} batch(es) of {batch} -> {a.out}")


def cmd_torch(a):
    """PyTorch's gradients of the same model and batch in float64 (the
    exported model is NAME built with --seed, as `export` built it)."""
    import torch
    import torch.nn.functional as F
    model, _ = build(a.model, a.seed)
    model = model.to(torch.float64)
    model.train()
    x, y = load_batch(a.data)
    loss = F.cross_entropy(model(torch.from_numpy(x).to(torch.float64)),
                           torch.from_numpy(y))
    loss.backward()
    out = {"loss": np.asarray(loss.item())}
    for n, p in model.named_parameters():
        out[n + ".grad"] = p.grad.numpy()
        out[n + ".value"] = p.detach().numpy()
    np.savez(a.out, **out)
    print(f"torch float64: loss {loss.item():.7g} -> {a.out}")


def module_input_shape(d, x):
    """The training model's input shape (its batch fixed at export)."""
    import onnx
    model = onnx.load(os.path.join(d, "training_model.onnx"))
    dims = [dim.dim_value for dim in model.graph.input[0].type.tensor_type.shape.dim]
    if not dims or any(v <= 0 for v in dims):
        sys.exit(f"{d}/training_model.onnx: input 0 has no static shape")
    return tuple(dims)


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------

def read_dump(path):
    """({name: grad}, {name: value}, loss) of an oasr-run dump or a step."""
    if not path.endswith((".onnx", ".npz", ".json")):
        # An ORT checkpoint, read through ORT's API.
        from onnxruntime.training.api import CheckpointState
        state = CheckpointState.load_checkpoint(path)
        return {}, {n: np.array(p.data) for n, p in state.parameters
                    if p.requires_grad}, float("nan")
    if path.endswith(".onnx"):
        # A model oasr-run --save wrote: its initializers are the values.
        import onnx
        from onnx import numpy_helper
        model = onnx.load(path)
        names = {n for n in read_dump_names(model)}
        values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
                  if t.name in names}
        return {}, values, float("nan")
    if path.endswith(".npz"):
        z = np.load(path)
        grads = {k[:-5]: z[k] for k in z.files if k.endswith(".grad")}
        values = {k[:-6]: z[k] for k in z.files if k.endswith(".value")}
        return grads, values, float(z["loss"])
    d = json.load(open(path))
    return ({k: np.asarray(v["grad"]) for k, v in d["params"].items()},
            {k: np.asarray(v["value"]) for k, v in d["params"].items()},
            d["loss"])


def read_dump_names(model):
    """The trained parameters of a training model: its accumulated
    gradients' names, or its '<param>_grad' outputs."""
    names = []
    for n in model.graph.node:
        if n.op_type.startswith("InPlaceAccumulator"):
            names.append(n.input[0][:-len("_grad.accumulation.buffer")])
    if not names:
        names = [o.name[:-5] for o in model.graph.output if o.name.endswith("_grad")]
    return names


def cmd_compare(a):
    ga, va, la = read_dump(a.a)
    gb, vb, lb = read_dump(a.b)
    xa, xb = (va, vb) if a.values else (ga, gb)
    what = "value" if a.values else "grad"
    ok = True
    lrel = abs(la - lb) / max(abs(lb), 1e-12)
    print(f"loss: {la:.7g} vs {lb:.7g} rel {lrel:.2e}")
    if not a.values and not a.no_loss and lrel > a.tol:
        ok = False
    worst = 0.0
    scale = max([np.linalg.norm(np.asarray(v, dtype=np.float64)) for v in xb.values()] + [0.0])
    for k in sorted(set(xa) | set(xb)):
        if k not in xa or k not in xb:
            print(f"{k}: only in {'the first' if k in xa else 'the second'} dump MISSING")
            ok = False
            continue
        p = np.asarray(xa[k], dtype=np.float64).reshape(-1)
        q = np.asarray(xb[k], dtype=np.float64).reshape(-1)
        if p.size != q.size:
            print(f"{k}: {p.size} vs {q.size} values MISMATCH")
            ok = False
            continue
        norm = np.linalg.norm(q)
        note = ""
        if norm < 1e-5 * scale:
            # A gradient that is zero in exact arithmetic (a convolution's
            # bias before BatchNormalization) is float noise on both sides:
            # measured against the largest gradient instead.
            norm, note = scale, " (vanishing: relative to the largest norm)"
        err = np.linalg.norm(p - q) / max(norm, 1e-30)
        worst = max(worst, err)
        good = err <= a.tol
        ok &= good
        print(f"{k}: {what} err {err:.2e}{note} {'ok' if good else 'MISMATCH'}")
    print(f"{'PASS' if ok else 'FAIL'}: {len(set(xa) | set(xb))} parameters, "
          f"worst {what} err {worst:.2e} (tolerance {a.tol:g})")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    e = sub.add_parser("export")
    e.add_argument("model", choices=NAMES)
    e.add_argument("dir")
    e.add_argument("--batch", type=int, default=4)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--weight-decay", type=float, default=0.0,
                   help="AdamW's weight decay (ORT's onnxblock AdamW)")
    f = sub.add_parser("fold")
    f.add_argument("dir")
    o = sub.add_parser("ops")
    o.add_argument("file")
    k = sub.add_parser("checkpoint")
    k.add_argument("saved")
    k.add_argument("dir")
    k.add_argument("out")
    r = sub.add_parser("torch")
    r.add_argument("model", choices=NAMES)
    r.add_argument("data")
    r.add_argument("out")
    r.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("text")
    t.add_argument("file")
    t.add_argument("out")
    s = sub.add_parser("step")
    s.add_argument("dir")
    s.add_argument("out")
    s.add_argument("--steps", type=int, default=1)
    s.add_argument("--data", help="IDX data directory (default DIR/data); "
                   "a multiple of the batch: the mean gradient of its batches")
    s.add_argument("--lr", type=float, help="learning rate (ORT's default "
                   "when not given)")
    s.add_argument("--update-last", action="store_true",
                   help="also apply the optimizer after the last step")
    s.add_argument("--checkpoint", help="start from this ORT checkpoint "
                   "(default DIR/checkpoint; its optimizer state, when it has "
                   "one, is AdamW's)")
    s.add_argument("--save-checkpoint", help="write ORT's state after the "
                   "steps, with the optimizer's, as an ORT checkpoint")
    d = sub.add_parser("data")
    d.add_argument("model", choices=NAMES)
    d.add_argument("out")
    d.add_argument("--samples", type=int, default=8)
    d.add_argument("--seed", type=int, default=7)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--tol", type=float, default=1e-4)
    c.add_argument("--values", action="store_true")
    c.add_argument("--no-loss", action="store_true",
                   help="do not compare the losses (an oasr-run dump on "
                   "several ranks holds rank 0's own loss)")
    a = p.parse_args()
    if a.cmd == "list":
        print("\n".join(NAMES))
        return 0
    return {"export": cmd_export, "fold": cmd_fold, "ops": cmd_ops,
            "step": cmd_step, "data": cmd_data, "text": cmd_text,
            "checkpoint": cmd_checkpoint, "torch": cmd_torch, "compare": cmd_compare}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
