"""Export a PyTorch model the way oasr trains it best, and check the result.

    from oasr import export
    export(model, example_inputs, "m.onnx")          # Python

    python3 -m oasr.export model.py:make_model --input 8x3x224x224 -o m.onnx
    python3 -m oasr.export model.py:make_model --input 8x128 --dtype int64 \\
        --vocab 30522 -o bert.onnx                    # token ids

PyTorch's own ``torch.onnx.export`` writes an inference graph by default
(since torch 2.9 its dynamo exporter folds BatchNormalization away), which
oasr-run refuses. This module exports for training:
  * the TorchScript exporter (``dynamo=False`` where torch has the flag), in
    ``TrainingMode.TRAINING`` (BatchNormalization and Dropout stay training
    ops), without constant folding, at opset 17;
  * input "input" (float) or "ids" (integer), output "logits", dimension 0
    named ``batch`` on both, so ``oasr-run --batch=N`` sets it;
  * one batch of data beside the model in oasr-run's formats (images as
    MNIST-layout IDX files: ``--data=mnist:DIR``; token ids as a u16 file
    with int64 labels: ``--data=tokens:FILE``), labels drawn below the
    number of classes (at most 256 for IDX label bytes);
  * then, unless told not to, it trains one step with oasr-run at learning
    rate 0 and compares oasr's loss on that batch with PyTorch's (on a copy
    of the model, Dropout off in both), within 1e-4 relative.
"""
import argparse
import contextlib
import copy
import importlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

from . import data

OPSET = 17
LOSS_RTOL = 1e-4


class ExportError(Exception):
    """A model, input or option oasr.export cannot use; the message says
    which and what to do."""


class Exported:
    """What export() wrote: the model, the data for oasr-run, the command
    that trains it, and the check's losses (None when not checked)."""

    def __init__(self, path, data, command, oasr_loss=None, torch_loss=None,
                 check_note=""):
        self.path, self.data, self.command = path, data, command
        self.oasr_loss, self.torch_loss = oasr_loss, torch_loss
        self.check_note = check_note

    def __repr__(self):
        return (f"Exported(path={self.path!r}, data={self.data!r}, "
                f"oasr_loss={self.oasr_loss}, torch_loss={self.torch_loss})")


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ExportError("oasr.export needs PyTorch (pip install torch onnx)") from e
    return torch


def exporter_args(torch):
    """torch 2.9 and later export through dynamo by default, which has no
    training mode: ask for the TorchScript exporter where the flag exists."""
    params = inspect.signature(torch.onnx.export).parameters
    return {"dynamo": False} if "dynamo" in params else {}


def _write_data(x, y, data_dir):
    """One batch in oasr-run's formats under data_dir; its --data value. With
    `y` None (a language model), the ids as one stream of next-token
    windows: the rows back to back and the first id once more."""
    import numpy as np
    x = x.detach().cpu().numpy()
    if y is None:
        stream = np.concatenate([x.reshape(-1), x.reshape(-1)[:1]])
        path = os.path.join(data_dir, "tokens.bin")
        os.makedirs(data_dir, exist_ok=True)
        stream.astype("<u2").tofile(path)
        if os.path.exists(path + ".labels"):
            os.remove(path + ".labels")
        return f"tokens:{path}"
    y = y.detach().cpu().numpy()
    if np.issubdtype(x.dtype, np.floating):
        if x.ndim < 2:
            raise ExportError(f"a float input must have a batch dimension and "
                              f"features; got shape {list(x.shape)}")
        return data.write_images(data_dir, x, y.astype(np.uint8))
    if x.min() < 0 or x.max() > 65535:
        raise ExportError(f"token ids must lie in [0, 65535] for oasr-run's "
                          f"token files; the input holds {x.min()}..{x.max()}")
    return data.write_tokens(os.path.join(data_dir, "tokens.bin"), x, y)


def _find_oasr_run(explicit):
    """oasr-run: the argument, $OASR_RUN, PATH, or this checkout's build."""
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise ExportError(f"oasr_run {explicit!r} is not an executable file")
        return explicit
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for c in [os.environ.get("OASR_RUN"), shutil.which("oasr-run"),
              os.path.join(here, "build", "bin", "oasr-run")]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


@contextlib.contextmanager
def _dropout_off(model):
    """Every Dropout module's p set to 0, restored after."""
    torch = _torch()
    saved = []  # (module, attribute, value)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0:
            saved.append((m, "p", m.p))
        elif isinstance(m, torch.nn.MultiheadAttention) and m.dropout > 0:
            saved.append((m, "dropout", m.dropout))  # attention weights'
    for m, attr, _ in saved:
        setattr(m, attr, 0.0)
    try:
        yield bool(saved)
    finally:
        for m, attr, value in saved:
            setattr(m, attr, value)


def _export_onnx(torch, model, inputs, path, input_name, opset):
    names = [input_name] if len(inputs) == 1 else \
        [f"{input_name}{i}" for i in range(len(inputs))]
    axes = {n: {0: "batch"} for n in names}
    axes["logits"] = {0: "batch"}
    # The exporter's warnings (num_batches_tracked's in-place add, the
    # deprecation of the TorchScript exporter) are about choices made here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(inputs), path,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=opset,
                          input_names=names, output_names=["logits"],
                          dynamic_axes=axes, **exporter_args(torch))


PARAMETERS_KEY = "oasr.parameters"  # lib/Import/ImporterImpl.h


def _record_parameters(model, path):
    """Writes the names of `model`'s trained parameters (named_parameters()
    that require gradients) into the ONNX file's metadata, so oasr-run
    trains exactly those and holds every buffer (a causal mask, rotary
    tables) and frozen parameter constant. Metadata and not TrainingInfo:
    a TrainingInfoProto would also have to carry an optimizer graph, which
    oasr-run takes from its own options."""
    try:
        import onnx
    except ImportError:
        raise ExportError("oasr.export needs the onnx package to record "
                          "which initializers are parameters (pip install "
                          "onnx, or Debian's python3-onnx)")
    m = onnx.load(path, load_external_data=False)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    kept = [e for e in m.metadata_props if e.key != PARAMETERS_KEY]
    del m.metadata_props[:]
    m.metadata_props.extend(kept)
    entry = m.metadata_props.add()
    entry.key, entry.value = PARAMETERS_KEY, json.dumps(names)
    onnx.save(m, path)


def export(model, example_inputs, path, *, check=True, oasr_run=None,
           data_dir=None, labels=None, opset=OPSET, quiet=False):
    """Exports `model` (an nn.Module) called on `example_inputs` (a tensor or
    a tuple of one tensor: images or token ids, batch first) to `path` for
    oasr, writes the batch beside it (`data_dir`, default PATH's stem +
    "-data") with `labels` (default: drawn with seed 0 below the number of
    classes), and checks it with oasr-run unless `check` is False. Returns an
    Exported; raises ExportError with the reason and the fix."""
    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"expected a torch.nn.Module, got {type(model).__name__}")
    inputs = example_inputs if isinstance(example_inputs, (tuple, list)) \
        else (example_inputs,)
    if len(inputs) != 1 or not torch.is_tensor(inputs[0]):
        raise ExportError("example_inputs must be one tensor (images or token "
                          "ids, batch first): oasr-run feeds one input")
    x = inputs[0]
    if x.dim() < 1 or x.shape[0] < 1:
        raise ExportError(f"the input needs a batch dimension; got shape {list(x.shape)}")
    integer = not torch.is_floating_point(x)
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data_dir = os.path.abspath(data_dir or os.path.splitext(path)[0] + "-data")

    was_training = model.training
    model.train()
    try:
        with torch.no_grad():
            probe = copy.deepcopy(model)
            with _dropout_off(probe):
                logits = probe(x)
        # Classification logits [batch, classes], or a language model's
        # per-position logits [batch, seq, vocab] for token ids [batch, seq]
        # (oasr-run's loss is then the mean cross-entropy over positions).
        per_position = (torch.is_tensor(logits) and integer and x.dim() == 2
                        and logits.dim() == 3 and logits.shape[:2] == x.shape)
        if not torch.is_tensor(logits) or logits.shape[0] != x.shape[0] or \
                (logits.dim() != 2 and not per_position):
            shape = list(logits.shape) if torch.is_tensor(logits) else type(logits).__name__
            raise ExportError(f"the model must return logits [batch, classes], or "
                              f"[batch, seq, vocab] for token ids [batch, seq] "
                              f"(oasr-run adds the softmax cross-entropy loss); "
                              f"it returned {shape}")
        classes = int(logits.shape[-1])
        want = tuple(x.shape) if per_position else (x.shape[0],)
        if per_position:
            # oasr-run reads a token stream in windows of seq + 1 at stride
            # seq: the rows of the batch back to back and one more token,
            # each position's label the token after it.
            if labels is not None:
                raise ExportError("a language model's labels are the next "
                                  "tokens of the stream; pass no labels")
            if x.max() >= classes or x.min() < 0:
                raise ExportError(f"token ids must lie in [0, {classes}), the "
                                  f"vocabulary of the logits; the input holds "
                                  f"{int(x.min())}..{int(x.max())}")
            stream = torch.cat([x.reshape(-1), x.reshape(-1)[:1]])
            labels = stream[1:].reshape(x.shape)
        if labels is None:
            g = torch.Generator().manual_seed(0)
            limit = classes if integer else min(classes, 256)
            labels = torch.randint(0, limit, want, generator=g)
        labels = torch.as_tensor(labels, dtype=torch.int64)
        if tuple(labels.shape) != want or labels.min() < 0 or labels.max() >= classes:
            raise ExportError(f"labels must be {list(want)} class indices in "
                              f"[0, {classes})")
        if not integer and labels.max() > 255:
            raise ExportError("image labels above 255 do not fit oasr-run's IDX "
                              "label bytes; pass labels below 256")
        # A copy: tracing a training-mode model updates BatchNorm's running
        # statistics, which the user's model keeps as they were.
        _export_onnx(torch, copy.deepcopy(model), inputs, path,
                     "ids" if integer else "input", opset)
        _record_parameters(model, path)
    finally:
        model.train(was_training)
    data_spec = _write_data(x, None if per_position else labels, data_dir)
    command = f"oasr-run {path} --batch={x.shape[0]} --data={data_spec}"
    result = Exported(path, data_spec, command)
    if not check:
        result.check_note = "not checked (check=False)"
        return result

    binary = _find_oasr_run(oasr_run)
    if not binary:
        raise ExportError("cannot check the export: no oasr-run (give oasr_run=, "
                          "set $OASR_RUN, put it on PATH, or pass check=False / "
                          "--no-check)")
    ref = copy.deepcopy(model).train()
    with tempfile.TemporaryDirectory(prefix="oasr-export-") as tmp, \
            _dropout_off(ref) as had_dropout:
        checked = path
        if had_dropout:
            # oasr's dropout masks are not PyTorch's: both without dropout.
            checked = os.path.join(tmp, "check.onnx")
            _export_onnx(torch, ref, inputs, checked, "ids" if integer else "input",
                         opset)
            _record_parameters(ref, checked)
        with torch.no_grad():
            out = ref(x)
            torch_loss = float(torch.nn.functional.cross_entropy(
                out.reshape(-1, out.shape[-1]), labels.reshape(-1)))
        dump = os.path.join(tmp, "grads.json")
        cmd = [binary, checked, f"--batch={x.shape[0]}", f"--data={data_spec}",
               "--steps=1", "--lr=0", "--quiet", f"--dump-grads={dump}"]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if p.returncode != 0:
            raise ExportError(f"oasr-run could not train {path} (exit "
                              f"{p.returncode}):\n{p.stdout.strip()}")
        with open(dump) as f:
            oasr_loss = float(json.load(f)["loss"])
    result.oasr_loss, result.torch_loss = oasr_loss, torch_loss
    err = abs(oasr_loss - torch_loss) / max(abs(torch_loss), 1e-12)
    result.check_note = (f"loss on the batch: oasr {oasr_loss:.6g}, PyTorch "
                         f"{torch_loss:.6g} (relative difference {err:.1e}"
                         f"{', Dropout off in both' if had_dropout else ''})")
    if not err <= LOSS_RTOL:
        raise ExportError(f"{path}: oasr's loss on the batch differs from "
                          f"PyTorch's: {result.check_note}; please report it")
    if not quiet:
        print(f"oasr.export: {result.check_note}", file=sys.stderr)
    return result


def _load_factory(spec):
    """FILE.py:FUNC (or module:FUNC) -> the nn.Module FUNC() returns."""
    if ":" not in spec:
        raise ExportError(f"'{spec}': expected FILE.py:FUNCTION (a function "
                          f"returning the nn.Module)")
    where, func = spec.rsplit(":", 1)
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise ExportError(f"'{where}': no such file")
        mspec = importlib.util.spec_from_file_location("oasr_export_model", where)
        module = importlib.util.module_from_spec(mspec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        mspec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    if not hasattr(module, func):
        raise ExportError(f"'{where}' has no '{func}'")
    return getattr(module, func)()


def _parse_shape(text):
    try:
        shape = [int(d) for d in text.lower().split("x")]
    except ValueError:
        shape = []
    if not shape or any(d < 1 for d in shape):
        raise ExportError(f"--input {text!r}: expected dimensions like 8x3x224x224 "
                          f"(batch first, each at least 1)")
    return shape


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m oasr.export",
        description="Export a PyTorch model for oasr-run (training mode, "
                    "TorchScript exporter, opset 17) with one batch of data, "
                    "and check oasr's loss against PyTorch's.")
    p.add_argument("model", help="FILE.py:FUNCTION returning the nn.Module "
                   "(or module:FUNCTION)")
    p.add_argument("--input", required=True, help="input shape, batch first, "
                   "e.g. 8x3x224x224 (images) or 8x128 (token ids)")
    p.add_argument("--dtype", choices=("float32", "int64"), default="float32",
                   help="float32 images (default) or int64 token ids")
    p.add_argument("--vocab", type=int, default=0,
                   help="token ids are drawn below this (int64 inputs)")
    p.add_argument("-o", "--output", required=True, help="the .onnx to write")
    p.add_argument("--data", help="where the batch goes (default: OUTPUT's "
                   "stem + -data)")
    p.add_argument("--seed", type=int, default=0, help="seed of the batch")
    p.add_argument("--no-check", action="store_true",
                   help="do not train one step with oasr-run to compare losses")
    p.add_argument("--oasr-run", help="the oasr-run to check with")
    a = p.parse_args(argv)
    try:
        torch = _torch()
        shape = _parse_shape(a.input)
        g = torch.Generator().manual_seed(a.seed)
        if a.dtype == "int64":
            if a.vocab < 2:
                raise ExportError("--dtype int64 needs --vocab N (ids are drawn "
                                  "in [1, N))")
            x = torch.randint(1, a.vocab, shape, generator=g)
        else:
            x = torch.randn(shape, generator=g)
        model = _load_factory(a.model)
        r = export(model, x, a.output, check=not a.no_check, oasr_run=a.oasr_run,
                   data_dir=a.data, quiet=True)
    except ExportError as e:
        print(f"oasr.export: error: {e}", file=sys.stderr)
        return 1
    print(f"oasr.export: wrote {r.path} and its batch ({r.data})")
    print(f"oasr.export: {r.check_note}")
    print(f"oasr.export: train it with: {r.command} --steps=100")
    return 0


if __name__ == "__main__":
    sys.exit(main())
