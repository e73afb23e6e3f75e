"""One markdown row from `oasr-plan --format=json` on stdin."""
import json
import sys

d = json.load(sys.stdin)
by = {s["name"]: s for s in d["strategies"]}
w = by["wfbp"]["iteration_us"]
cells = []
for n in ["wfbp", "single", "ddp", "horovod", "mgwfbp", "optimal", "oasr"]:
    t = by[n]["iteration_us"]
    cells.append("%.2f (%.2fx, %dg)" % (t / 1e3, w / t, by[n]["num_groups"]))
print("| %s | %d | %s | %.2f |" % (d["model"], d["num_grads"], " | ".join(cells),
                                   d["lower_bound_us"] / 1e3))
