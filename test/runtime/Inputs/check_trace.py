#!/usr/bin/python3
"""Checks an `oasr-run --trace` Chrome trace from a multi-rank run.

    check_trace.py TRACE.json --ranks P --groups G [--min-overlap N]

The file must be strict JSON (no NaN/Infinity) with, for every rank r in
0..P-1: a process (pid r) named "rank r" with a "compute" lane (tid 0) and a
"communication" lane (tid 1); forward, backward and update ops on the
compute lane, the same op names on every rank; and every fused allreduce
group 0..G-1 as an event on the communication lane (and none elsewhere).
Prints, per rank, how many allreduce events overlap a backward op in time
(communication progressing while backward compute runs) and fails unless at
least N (default 1) do.
"""
import argparse
import collections
import json
import sys


def reject(constant):
    raise ValueError(f"not strict JSON: {constant}")


p = argparse.ArgumentParser()
p.add_argument("trace")
p.add_argument("--ranks", type=int, required=True)
p.add_argument("--groups", type=int, required=True)
p.add_argument("--min-overlap", type=int, default=1,
               help="allreduce events that must overlap backward compute")
a = p.parse_args()
events = json.loads(open(a.trace).read(), parse_constant=reject)["traceEvents"]


def fail(msg):
    sys.exit(f"{a.trace}: {msg}")


names = {(e["pid"], e.get("tid")): e["args"]["name"]
         for e in events if e["ph"] == "M"}
pids = sorted({e["pid"] for e in events})
if pids != list(range(a.ranks)):
    fail(f"processes {pids}, expected 0..{a.ranks - 1}")
lanes = collections.defaultdict(list)
for e in events:
    if e["ph"] == "X":
        if e["dur"] < 0 or e["ts"] < 0:
            fail(f"negative time in {e}")
        lanes[(e["pid"], e["tid"])].append(e)

ops_of_rank, total_overlap = [], 0
for r in range(a.ranks):
    want = {(r, None): f"rank {r}", (r, 0): "compute", (r, 1): "communication"}
    for key, name in want.items():
        if names.get(key) != name:
            fail(f"pid {r} tid {key[1]}: name {names.get(key)!r}, expected {name!r}")
    compute, comm = lanes[(r, 0)], lanes[(r, 1)]
    if set(lanes) - {(q, t) for q in range(a.ranks) for t in (0, 1)}:
        fail(f"events on unexpected lanes {sorted(set(lanes))}")
    cats = {e["cat"] for e in compute}
    if not {"forward", "backward", "update"} <= cats:
        fail(f"rank {r}: compute lane categories {sorted(cats)}")
    if any(e["cat"] == "allreduce" for e in compute):
        fail(f"rank {r}: an allreduce on the compute lane")
    groups = {e["name"] for e in comm if e["cat"] == "allreduce"}
    expected = {f"allreduce group {g}" for g in range(a.groups)}
    if groups != expected:
        fail(f"rank {r}: communication lane has {sorted(groups)}, expected {sorted(expected)}")
    ops_of_rank.append({e["name"] for e in compute})
    backward = [(e["ts"], e["ts"] + e["dur"]) for e in compute if e["cat"] == "backward"]
    overlapping = sum(
        any(s < ce and cs < s + e["dur"] for cs, ce in backward)
        for e in comm for s in [e["ts"]] if e["cat"] == "allreduce")
    total_overlap += overlapping
    print(f"rank {r}: {len(compute)} compute events, {len(comm)} allreduces, "
          f"{overlapping} overlapping backward compute")
if any(ops != ops_of_rank[0] for ops in ops_of_rank):
    fail("ranks ran different ops")
if total_overlap < a.min_overlap:
    fail(f"{total_overlap} allreduce(s) overlap backward compute, expected at least {a.min_overlap}")
print(f"trace ok: {a.ranks} ranks, {a.groups} groups on every communication lane")
