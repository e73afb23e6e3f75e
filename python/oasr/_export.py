"""Export a PyTorch model the way oasr trains it best, and check the result.

    from oasr import export
    export(model, example_inputs, "m.onnx")          # Python

    python3 -m oasr.export model.py:make_model --input 8x3x224x224 -o m.onnx
    python3 -m oasr.export model.py:make_model --input 8x128 --dtype int64 \\
        --vocab 30522 -o bert.onnx                    # token ids

PyTorch's own ``torch.onnx.export`` writes an inference graph by default
(since torch 2.9 its dynamo exporter folds BatchNormalization away), which
oasr-run refuses. This module exports for training, by one of two routes
(``exporter=``, ``--exporter``; docs/pytorch.md has the measurements):
  * "dynamo" (torch 2.9 and later, with onnxscript): torch.export of the
    train-mode module, BatchNormalization translated in training mode
    (onnxscript's own translation always writes inference mode), its graph
    optimizer off (it folds BatchNormalization into the convolutions and
    weights into derived constants), only shape arithmetic folded;
  * "torchscript": the TorchScript exporter (``dynamo=False`` where torch
    has the flag), in ``TrainingMode.TRAINING`` (BatchNormalization and
    Dropout stay training ops), without constant folding, at opset 17;
  * "auto" (the default) takes the dynamo route on torch 2.9 and later
    and falls back to TorchScript where that route fails or gives a graph
    oasr-run cannot train as PyTorch does, saying why;
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

OPSET = 17          # the TorchScript route's
DYNAMO_OPSET = 18   # the dynamo route's: onnxscript's translations are opset 18
DYNAMO_SINCE = (2, 9)  # torch.onnx.export's default exporter from here on
EXPORTERS = ("auto", "dynamo", "torchscript")
LOSS_RTOL = 1e-4


class ExportError(Exception):
    """A model, input or option oasr.export cannot use; the message says
    which and what to do."""


class Exported:
    """What export() wrote: the model, the data for oasr-run, the command
    that trains it, and the check's losses (None when not checked)."""

    def __init__(self, path, data, command, oasr_loss=None, torch_loss=None,
                 check_note="", exporter="", exporter_note=""):
        self.path, self.data, self.command = path, data, command
        self.oasr_loss, self.torch_loss = oasr_loss, torch_loss
        self.check_note = check_note
        # The route that wrote `path` ("dynamo" or "torchscript") and why.
        self.exporter, self.exporter_note = exporter, exporter_note

    def __repr__(self):
        return (f"Exported(path={self.path!r}, data={self.data!r}, "
                f"exporter={self.exporter!r}, oasr_loss={self.oasr_loss}, "
                f"torch_loss={self.torch_loss})")


class _RouteFailed(Exception):
    """The dynamo route gave no graph oasr trains as PyTorch does; the
    message says what was wrong with it."""


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


def torch_version(torch):
    """(major, minor) of `torch`."""
    try:
        return tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
    except ValueError:
        return (0, 0)


def dynamo_missing(torch):
    """Why `torch` cannot take the dynamo route ("" when it can): the route
    needs torch.onnx.export's dynamo=, optimize= and
    custom_translation_table=, and onnxscript."""
    params = inspect.signature(torch.onnx.export).parameters
    lacking = [p for p in ("dynamo", "optimize", "custom_translation_table")
               if p not in params]
    if lacking:
        return (f"torch {torch.__version__} has no dynamo exporter for it "
                f"(torch.onnx.export takes no "
                f"{', '.join(p + '=' for p in lacking)})")
    if importlib.util.find_spec("onnxscript") is None:
        return (f"torch {torch.__version__} has no onnxscript beside it "
                f"(pip install onnxscript)")
    return ""


def _routes(torch, exporter):
    """The routes to try in order, and why the first."""
    if exporter not in EXPORTERS:
        raise ExportError(f"exporter {exporter!r} (--exporter): expected one "
                          f"of {', '.join(EXPORTERS)}")
    missing = dynamo_missing(torch)
    if exporter == "torchscript":
        return ["torchscript"], "asked for (exporter='torchscript')"
    if exporter == "dynamo":
        if missing:
            raise ExportError(f"exporter 'dynamo' (--exporter dynamo): {missing}; "
                              f"use exporter 'torchscript' or 'auto'")
        return ["dynamo"], "asked for (exporter='dynamo')"
    if missing:
        return ["torchscript"], missing
    if torch_version(torch) < DYNAMO_SINCE:
        return ["torchscript"], (f"torch {torch.__version__} exports through "
                                 f"TorchScript by default (the dynamo route is "
                                 f"taken from torch 2.9; exporter='dynamo' "
                                 f"tries it)")
    return ["dynamo", "torchscript"], (f"torch {torch.__version__}'s default "
                                       f"exporter")


def _batch_norm_training():
    """aten._native_batch_norm_legit_functional as BatchNormalization in
    training mode: batch statistics, the running ones as outputs 1 and 2.
    onnxscript's own translation sets training to False whatever the
    module does, which gives an inference graph."""
    from onnxscript import opset18 as op

    def batch_norm(input, weight=None, bias=None, running_mean=None,
                   running_var=None, training=False, momentum=0.9, eps=1e-5):
        rank = len(input.shape)
        axes = op.Constant(value_ints=[0] + list(range(2, rank)))
        channels = op.Shape(input, start=1, end=2)
        one = op.Constant(value_floats=[1.0])
        if weight is None:
            weight = op.Expand(one, channels)
        if bias is None:
            bias = op.Expand(op.Constant(value_floats=[0.0]), channels)
        # save_mean and save_invstd, which only a backward graph reads
        mean = op.ReduceMean(input, axes, keepdims=0)
        centred = op.Sub(input, op.ReduceMean(input, axes, keepdims=1))
        var = op.ReduceMean(op.Mul(centred, centred), axes, keepdims=0)
        invstd = op.Div(one, op.Sqrt(op.Add(var, op.Constant(value_float=eps))))
        if not training:
            y = op.BatchNormalization(input, weight, bias, running_mean,
                                      running_var, epsilon=eps,
                                      momentum=1.0 - momentum, training_mode=0)
            return y, mean, invstd, op.Identity(running_mean), op.Identity(running_var)
        y, new_mean, new_var = op.BatchNormalization(
            input, weight, bias, running_mean, running_var, epsilon=eps,
            momentum=1.0 - momentum, training_mode=1)
        return y, mean, invstd, new_mean, new_var

    return batch_norm


def _export_dynamo(torch, model, inputs, path, input_name, opset):
    """The dynamo route: torch.export of the train-mode module, without the
    exporter's graph optimizer (it fuses BatchNormalization into Conv and
    folds weights into derived constants: a transposed attention weight no
    longer carries the parameter's name). Only nodes that read no
    parameter or buffer values are folded; CastLike to the type it already
    has becomes a use of its input."""
    import io
    import onnxscript.optimizer
    from onnxscript import ir
    table = {torch.ops.aten._native_batch_norm_legit_functional.default:
             _batch_norm_training()}
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            program = torch.export.export(
                model, tuple(inputs),
                dynamic_shapes=({0: torch.export.Dim("batch")},))
            program = program.run_decompositions(
                {torch.ops.aten.scaled_dot_product_attention.default:
                 _attention_decomposition})
            dropouts = sum(1 for n in program.graph.nodes
                           if n.target == torch.ops.aten.native_dropout.default
                           and n.args[1] > 0 and n.args[2])
            program = torch.onnx.export(
                program, tuple(inputs), None, dynamo=True, optimize=False,
                opset_version=opset, input_names=[input_name],
                output_names=["logits"], custom_translation_table=table,
                verbose=False)
        except Exception as e:  # torch.export's and the translation's
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise _RouteFailed(f"the export failed: {type(e).__name__}: "
                               f"{first[:300]}") from e
    onnx_model = program.model
    held = set(model.state_dict())

    def should_fold(node):
        if node.op_type in ("Shape", "Size"):
            return None
        if any(v is not None and v.is_initializer() and v.name in held
               for v in node.inputs):
            return False
        return None

    onnxscript.optimizer.fold_constants(onnx_model, should_fold=should_fold,
                                        onnx_shape_inference=True)
    outputs = set(id(v) for v in onnx_model.graph.outputs)
    for node in list(onnx_model.graph):
        if node.op_type != "CastLike" or node.domain not in ("", "ai.onnx"):
            continue
        x, like = node.inputs
        y = node.outputs[0]
        if x.dtype is not None and x.dtype == like.dtype and id(y) not in outputs:
            y.replace_all_uses_with(x)
    ir.passes.common.RemoveUnusedNodesPass()(onnx_model)
    program.save(path, external_data=False)
    _name_batch(path, input_name)
    return dropouts


def _name_batch(path, input_name):
    """Dimension 0 of the input is `batch` wherever its symbol appears."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    dims = [i for i in m.graph.input if i.name == input_name][0] \
        .type.tensor_type.shape.dim
    symbol = dims[0].dim_param if dims else ""
    if not symbol or symbol == "batch":
        return
    for v in [*m.graph.input, *m.graph.output, *m.graph.value_info]:
        for d in v.type.tensor_type.shape.dim:
            if d.dim_param == symbol:
                d.dim_param = "batch"
    onnx.save(m, path)


def _attention_decomposition(q, k, v, attn_mask=None, dropout_p=0.0,
                             is_causal=False, *, scale=None, enable_gqa=False):
    """scaled_dot_product_attention in aten ops, for torch.export's
    run_decompositions: onnxscript translates the fused op with its
    dropout in inference mode, and this with native_dropout in training
    mode."""
    import math
    torch = _torch()
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention with enable_gqa")
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(q * s, k.transpose(-2, -1))
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool,
                          device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, True)
    return torch.matmul(weights, v)


def _dynamo_graph_problem(torch, model, path, dropouts):
    """What keeps the dynamo route's graph at `path` from training as the
    module does ("" when nothing): a trained parameter that is no
    initializer, a train-mode BatchNorm layer without a training-mode
    BatchNormalization, fewer Dropout nodes than the `dropouts` the
    program runs, or convolutions without any normalisation, which
    oasr-run refuses from PyTorch's dynamo exporter because it cannot tell
    them from a graph whose BatchNormalization was folded away
    (onnximport::inferenceGraphReason)."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    lost = [n for n, p in model.named_parameters()
            if p.requires_grad and n not in inits]
    if lost:
        return (f"{len(lost)} of the module's parameters are not initializers "
                f"of its graph (the first '{lost[0]}')")
    layers = sum(1 for mod in model.modules()
                 if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm)
                 and mod.training)
    modes = [next((a.i for a in n.attribute if a.name == "training_mode"), 0)
             for n in m.graph.node if n.op_type == "BatchNormalization"]
    if layers and (not modes or not all(modes)):
        return (f"its graph has {sum(1 for t in modes if t)} "
                f"BatchNormalization nodes in training mode and "
                f"{sum(1 for t in modes if not t)} in inference mode for the "
                f"module's {layers} train-mode BatchNorm layers")
    ops = [n.op_type for n in m.graph.node]
    if ops.count("Dropout") < dropouts:
        return (f"its graph has {ops.count('Dropout')} Dropout nodes for the "
                f"{dropouts} dropouts of the module's program")
    norms = sum(ops.count(o) for o in ("BatchNormalization", "InstanceNormalization",
                                       "GroupNormalization", "LayerNormalization"))
    if ops.count("Conv") and not norms:
        return (f"its {ops.count('Conv')} Conv nodes have no normalisation, "
                f"which oasr-run refuses from PyTorch's dynamo exporter (it "
                f"cannot tell them from a graph whose BatchNormalization was "
                f"folded away)")
    return ""


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


def _record_parameters(model, path, buffers=None):
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
    if buffers:
        # The TorchScript exporter traces the train-mode forward, which
        # updates BatchNorm's running statistics before it writes them.
        from onnx import numpy_helper
        for i, t in enumerate(m.graph.initializer):
            b = buffers.get(t.name)
            if b is not None and tuple(b.shape) == tuple(t.dims):
                m.graph.initializer[i].CopyFrom(
                    numpy_helper.from_array(b.cpu().numpy(), t.name))
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    kept = [e for e in m.metadata_props if e.key != PARAMETERS_KEY]
    del m.metadata_props[:]
    m.metadata_props.extend(kept)
    entry = m.metadata_props.add()
    entry.key, entry.value = PARAMETERS_KEY, json.dumps(names)
    onnx.save(m, path)


def _write_route(torch, route, model, inputs, path, input_name, opset):
    """Exports the train-mode `model` (a copy: tracing updates BatchNorm's
    statistics) to `path` by `route` and records its parameters; raises
    _RouteFailed with what was wrong with a dynamo graph."""
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    if route == "dynamo":
        dropouts = _export_dynamo(torch, model, inputs, path, input_name,
                                  opset or DYNAMO_OPSET)
        problem = _dynamo_graph_problem(torch, model, path, dropouts)
        if problem:
            raise _RouteFailed(problem)
    else:
        _export_onnx(torch, model, inputs, path, input_name, opset or OPSET)
    _record_parameters(model, path, buffers)


def _check(torch, route, model, x, labels, path, data_spec, binary, opset,
           input_name):
    """Trains one step of the batch with oasr-run at lr 0; (oasr's loss,
    PyTorch's, the note). Raises ExportError when oasr-run fails or the
    losses differ."""
    ref = copy.deepcopy(model).train()
    with tempfile.TemporaryDirectory(prefix="oasr-export-") as tmp, \
            _dropout_off(ref) as had_dropout:
        checked = path
        if had_dropout:
            # oasr's dropout masks are not PyTorch's: both without dropout.
            checked = os.path.join(tmp, "check.onnx")
            try:
                _write_route(torch, route, copy.deepcopy(ref), (x,), checked,
                             input_name, opset)
            except _RouteFailed as e:
                raise ExportError(f"the model without Dropout: {e}") from e
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
    err = abs(oasr_loss - torch_loss) / max(abs(torch_loss), 1e-12)
    note = (f"loss on the batch: oasr {oasr_loss:.6g}, PyTorch "
            f"{torch_loss:.6g} (relative difference {err:.1e}"
            f"{', Dropout off in both' if had_dropout else ''})")
    if not err <= LOSS_RTOL:
        raise ExportError(f"{path}: oasr's loss on the batch differs from "
                          f"PyTorch's: {note}; please report it")
    return oasr_loss, torch_loss, note


def export(model, example_inputs, path, *, check=True, oasr_run=None,
           data_dir=None, labels=None, opset=None, quiet=False,
           exporter="auto"):
    """Exports `model` (an nn.Module) called on `example_inputs` (a tensor or
    a tuple of one tensor: images or token ids, batch first) to `path` for
    oasr, writes the batch beside it (`data_dir`, default PATH's stem +
    "-data") with `labels` (default: drawn with seed 0 below the number of
    classes), and checks it with oasr-run unless `check` is False.
    `exporter` is "auto" (dynamo on torch 2.9 and later, TorchScript where
    that fails), "dynamo" or "torchscript"; `opset` defaults to the
    route's (18 dynamo, 17 TorchScript). Returns an Exported, whose
    `exporter` and `exporter_note` say which route wrote the file and why;
    raises ExportError with the reason and the fix."""
    torch = _torch()
    routes, why = _routes(torch, exporter)
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
    input_name = "ids" if integer else "input"
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
        # Every route exports a train-mode copy and keeps the user's module.
        trained = copy.deepcopy(model).train()
    finally:
        model.train(was_training)
    data_spec = _write_data(x, None if per_position else labels, data_dir)
    command = f"oasr-run {path} --batch={x.shape[0]} --data={data_spec}"
    binary = None
    if check:
        binary = _find_oasr_run(oasr_run)
        if not binary:
            raise ExportError("cannot check the export: no oasr-run (give "
                              "oasr_run=, set $OASR_RUN, put it on PATH, or "
                              "pass check=False / --no-check)")
    for i, route in enumerate(routes):
        fallback = i + 1 < len(routes)
        try:
            _write_route(torch, route, copy.deepcopy(trained), inputs, path,
                         input_name, opset)
            result = Exported(path, data_spec, command, exporter=route)
            if check:
                result.oasr_loss, result.torch_loss, result.check_note = _check(
                    torch, route, trained, x, labels, path, data_spec, binary,
                    opset, input_name)
            else:
                result.check_note = "not checked (check=False)"
            break
        except (_RouteFailed, ExportError) as e:
            if not fallback:
                if isinstance(e, _RouteFailed):
                    raise ExportError(f"exporter 'dynamo': {e}; exporter "
                                      f"'torchscript' may export it") from e
                raise
            why = (f"the dynamo route was tried first and "
                   f"{_failure(e, binary)}")
    result.exporter_note = why
    if not quiet:
        print(f"oasr.export: exporter: {route}: {why}", file=sys.stderr)
        print(f"oasr.export: {result.check_note}", file=sys.stderr)
    return result


def _failure(e, binary):
    """A failed dynamo attempt, as the reason for the fallback."""
    text = str(e)
    if isinstance(e, _RouteFailed):
        return text
    lines = [l for l in text.splitlines() if l.strip()]
    if binary and len(lines) > 1:  # oasr-run's output: its error line
        errs = [l for l in lines[1:] if "error" in l] or lines[1:]
        return f"oasr-run could not train its graph: {errs[0].strip()[:400]}"
    return text[:400]


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
        description="Export a PyTorch model for oasr-run (training mode; "
                    "the dynamo exporter on torch 2.9 and later, else "
                    "TorchScript) with one batch of data, and check oasr's "
                    "loss against PyTorch's.")
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
    p.add_argument("--exporter", default="auto", help="auto (default: "
                   "dynamo on torch 2.9 and later, TorchScript where it "
                   "fails), dynamo or torchscript")
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
                   data_dir=a.data, quiet=True, exporter=a.exporter)
    except ExportError as e:
        print(f"oasr.export: error: {e}", file=sys.stderr)
        return 1
    print(f"oasr.export: exporter: {r.exporter}: {r.exporter_note}")
    print(f"oasr.export: wrote {r.path} and its batch ({r.data})")
    print(f"oasr.export: {r.check_note}")
    print(f"oasr.export: train it with: {r.command} --steps=100")
    return 0


if __name__ == "__main__":
    sys.exit(main())
