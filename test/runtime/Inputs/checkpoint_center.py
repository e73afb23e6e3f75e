"""checkpoint_center.py STEP_DIR MODEL.onnx

Checks that a parameter-server checkpoint's center variable (the manifest's
`algorithm_state`: every f32 parameter and BN statistic, in the tensor
table's order) equals, bit for bit, the initializers of the model a run saved
(whose final weights are the center variable)."""
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper

step_dir, model_path = sys.argv[1], sys.argv[2]
manifest = json.load(open(f"{step_dir}/manifest.json"))
blob = open(f"{step_dir}/{manifest['blob']['file']}", "rb").read()
state = manifest["algorithm_state"]
center = np.frombuffer(blob, dtype=np.float32, count=state["floats"],
                       offset=state["offset"])
saved = {i.name: numpy_helper.to_array(i)
         for i in onnx.load(model_path).graph.initializer}
at = 0
compared = 0
for t in manifest["tensors"]:
    if t["dtype"] != "f32" or t["kind"] == "optimizer":
        continue
    n = int(np.prod(t["shape"], dtype=np.int64))
    part = center[at:at + n]
    at += n
    if t["name"] not in saved:
        sys.exit(f"{t['name']}: not an initializer of {model_path}")
    want = saved[t["name"]].astype(np.float32).ravel()
    if part.tobytes() != want.tobytes():
        diff = np.abs(part - want).max()
        sys.exit(f"{t['name']}: center differs from the saved weights "
                 f"(max |diff| {diff:g})")
    compared += 1
if at != center.size:
    sys.exit(f"the center holds {center.size} floats, the table {at}")
print(f"center variable equals the saved weights: {compared} tensors")
