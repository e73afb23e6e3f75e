"""The trained weights back in PyTorch.

    from oasr import load_weights
    load_weights(model, "ckpt/step-00000100")   # an oasr-run checkpoint
    load_weights(model, "trained.onnx")         # oasr-run --save=FILE
    load_weights(model, "m.safetensors")        # a safetensors file

Reads every parameter and buffer oasr-run kept (BatchNorm's running
statistics, masks, tables) by the names the model was exported with
(oasr.export keeps PyTorch's), checks names and shapes against the
module's state_dict() and copies them in. Optimizer state is left out.
"""
import json
import os

import numpy as np

_DTYPES = {"f32": np.float32, "f16": np.float16, "i64": np.int64,
           "i32": np.int32, "i1": np.bool_}


class WeightsError(ValueError):
    """A weights file that cannot be loaded into the module: says which
    tensor and why."""


def _from_checkpoint(directory):
    manifest = os.path.join(directory, "manifest.json")
    with open(manifest) as f:
        m = json.load(f)
    blob_path = os.path.join(directory, m["blob"]["file"])
    blob = np.fromfile(blob_path, dtype=np.uint8)
    out = {}
    for t in m["tensors"]:
        if t["kind"] == "optimizer":
            continue
        if t["dtype"] == "bf16":
            raw = blob[t["offset"]:t["offset"] + t["bytes"]].view(np.uint16)
            values = (raw.astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] in _DTYPES:
            values = blob[t["offset"]:t["offset"] + t["bytes"]].view(_DTYPES[t["dtype"]])
        else:
            raise WeightsError(f"{manifest}: tensor '{t['name']}' has dtype "
                               f"{t['dtype']}, which this reader does not know")
        out[t["name"]] = values.reshape(t["shape"]).copy()
    return out


def _from_onnx(path):
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise WeightsError(f"{path}: reading an ONNX file needs the onnx package")
    model = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _from_safetensors(path):
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise WeightsError(f"{path}: reading a safetensors file needs the "
                           "safetensors package")
    return load_file(path)


def read_weights(source):
    """{name: numpy array} of the parameters and buffers in `source`: a
    checkpoint directory, an ONNX file or a .safetensors file."""
    if os.path.isdir(source):
        if not os.path.exists(os.path.join(source, "manifest.json")):
            raise WeightsError(f"{source}: a directory without manifest.json "
                               "is no oasr-run checkpoint (pass a step-N "
                               "directory inside --checkpoint=DIR)")
        return _from_checkpoint(source)
    if not os.path.exists(source):
        raise WeightsError(f"{source}: no such file or directory")
    if source.endswith(".safetensors"):
        return _from_safetensors(source)
    return _from_onnx(source)


def load_weights(model, source, strict=True):
    """Copies the weights in `source` into `model` (an nn.Module) by name.
    With `strict`, every parameter and floating-point buffer of the module
    must be there with its shape, and every tensor there must be one of the
    module's (as load_state_dict(strict=True)); integer buffers oasr does
    not track (BatchNorm's num_batches_tracked) keep their values. Returns
    the names copied; raises WeightsError naming the tensor at fault."""
    import torch
    weights = read_weights(source)
    state = model.state_dict()
    # ONNX keeps constants the exporter folded (shapes, scalars) as
    # initializers too; only names the module has are its tensors.
    problems, copied = [], []
    for name, target in state.items():
        if name not in weights:
            if strict and target.is_floating_point():
                problems.append(f"'{name}' {list(target.shape)} is not in {source}")
            continue
        value = weights[name]
        if tuple(value.shape) != tuple(target.shape):
            problems.append(f"'{name}': {source} has shape {list(value.shape)}, "
                            f"the module {list(target.shape)}")
            continue
        copied.append(name)
    if strict and os.path.isdir(source):
        # Exporter-made constants ('onnx::Mul_12') are no module tensors.
        extra = sorted(n for n in set(weights) - set(state)
                       if "::" not in n and "/" not in n)
        if extra:
            problems.append(f"{source} has tensors the module lacks: "
                            + ", ".join(f"'{n}'" for n in extra[:8])
                            + (f" and {len(extra) - 8} more" if len(extra) > 8 else ""))
    if problems:
        raise WeightsError("cannot load the weights: " + "; ".join(problems))
    # Nothing changes unless everything fits.
    with torch.no_grad():
        for name in copied:
            value = torch.from_numpy(np.ascontiguousarray(weights[name]))
            state[name].copy_(value.to(state[name].dtype))
    return copied
