#!/usr/bin/python3
"""check_load_weights.py SOURCE DUMP.json [--torch-strict]: loads SOURCE (a
checkpoint, an ONNX file or a .safetensors file of oasr-run) into a fresh
buffer_model.MaskedAttention with oasr.load_weights (with --torch-strict:
PyTorch's own model.load_state_dict(safetensors.torch.load_file(SOURCE),
strict=True)), and checks that every parameter equals the dump's value
bit for bit and that the buffers are the module's own (held constant).
Then the errors: a module whose head has another shape, and a checkpoint
directory without a manifest."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import buffer_model  # noqa: E402
from oasr import WeightsError, load_weights  # noqa: E402

source, dump = sys.argv[1], sys.argv[2]
torch_strict = "--torch-strict" in sys.argv[3:]
torch.manual_seed(1)  # other initial weights than the exported ones
model = buffer_model.MaskedAttention()
fresh = {k: v.clone() for k, v in model.state_dict().items()}
if torch_strict:
    from safetensors.torch import load_file
    weights = load_file(source)
    model.load_state_dict(weights, strict=True)
    copied = list(weights)
else:
    copied = load_weights(model, source)
d = json.load(open(dump))
for name, p in d["params"].items():
    got = model.state_dict()[name].numpy().ravel()
    want = np.array(p["value"], dtype=np.float32)
    if not np.array_equal(got, want):
        sys.exit(f"{name}: differs from the dump after load_weights")
for name in ("mask", "rope_cos"):
    if not torch.equal(model.state_dict()[name], fresh[name]):
        sys.exit(f"buffer {name} changed")
print(f"loaded {len(copied)} tensors; {len(d['params'])} parameters equal "
      "the dump bitwise; buffers as exported")

if torch_strict:
    sys.exit(0)
wrong = buffer_model.MaskedAttention()
wrong.head = torch.nn.Linear(buffer_model.D, 3)
try:
    load_weights(wrong, source)
    sys.exit("a head of another shape loaded")
except WeightsError as e:
    print(f"error: {e}")
try:
    load_weights(model, os.path.dirname(dump))
    sys.exit("a directory without a manifest loaded")
except WeightsError as e:
    print(f"error: {e}")
