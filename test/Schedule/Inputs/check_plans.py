"""Checks oasr-plan --format=json output read from stdin (lit helper):
prints "ok", or "FAIL PROFILE: ..." and exits 1."""
import json
import sys

d = json.load(sys.stdin)
by = {s["name"]: s for s in d["strategies"]}
eps = 1e-9 * by["optimal"]["iteration_us"]
bad = []
for s in d["strategies"]:
    if s["iteration_us"] < by["optimal"]["iteration_us"] - eps:
        bad.append(f"{s['name']} beats optimal")
    if s["iteration_us"] < d["lower_bound_us"] - eps:
        bad.append(f"{s['name']} below the lower bound")
    names = [g for group in s["groups"] for g in group]
    if len(names) != d["num_grads"] or len(set(names)) != len(names):
        bad.append(f"{s['name']} is not a partition")
if abs(by["oasr"]["iteration_us"] - by["optimal"]["iteration_us"]) > eps:
    bad.append("oasr differs from optimal without extras")
if by["mgwfbp"]["iteration_us"] < by["oasr"]["iteration_us"] - eps:
    bad.append("mgwfbp beats oasr")
print(("FAIL " + sys.argv[1] + ": " + "; ".join(bad)) if bad else "ok")
sys.exit(1 if bad else 0)
