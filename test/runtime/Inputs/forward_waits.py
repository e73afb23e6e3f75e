#!/usr/bin/env python3
"""Reads an `oasr-run --trace` file and prints, for rank 0's compute lane,
how many allreduce_wait events sit between two forward instructions (with
only updates between: per-layer forward waits), how much of rank 0's
forward time ran while one of its collectives was in flight, and how many
collectives of each kind (allreduce, reduce-scatter, all-gather) its
communication lane ran.

    forward_waits.py TRACE.json
"""
import json
import sys

events = [e for e in json.load(open(sys.argv[1]))["traceEvents"]
          if e.get("ph") == "X" and e.get("pid") == 0]
lane = sorted((e for e in events if e.get("tid") == 0), key=lambda e: e["ts"])
comm = [e for e in events if e.get("tid") == 1]

between = 0
last = None  # the last non-update category seen
pending_wait = False
for e in lane:
    cat = e.get("cat")
    if cat == "update":
        continue
    if cat == "comm" and e["name"].startswith("allreduce_wait"):
        pending_wait = last == "forward"
        continue
    if cat == "forward" and pending_wait:
        between += 1
    pending_wait = False
    last = cat

overlap = 0.0
for f in lane:
    if f.get("cat") != "forward":
        continue
    for c in comm:
        lo = max(f["ts"], c["ts"])
        hi = min(f["ts"] + f["dur"], c["ts"] + c["dur"])
        overlap += max(0.0, hi - lo)
print(f"waits between forward instructions: {between}")
print(f"forward beside an allreduce: {overlap:.0f} us")
kinds = {}
for c in comm:
    kinds[c.get("cat")] = kinds.get(c.get("cat"), 0) + 1
print("collectives: " + ", ".join(f"{k} {kinds[k]}" for k in sorted(kinds)))
