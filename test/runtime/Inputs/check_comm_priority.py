"""Checks the communication priority an `oasr-bench comm` calibration
records: every candidate it measured is under overlap.by_priority, and
comm_priority is the one that kept more work going (the mean of the overlap
rate and the rate of its calls, plus the compute rate), in the order idle,
sleep, normal, realtime (each where the process may use it), a later one
replacing an earlier one only when it beats it by more than 0.05 -- or,
when the allreduce took under 1 ms alone (too short to compare), idle if
measured, else normal.

    check_comm_priority.py CALIBRATION.json [--expect idle|sleep|normal|realtime]
Prints "recorded: PRIORITY (measured: ...)" or exits 1 naming the mismatch.
"""
import json
import sys

order = ["idle", "sleep", "normal", "realtime"]
d = json.load(open(sys.argv[1]))
rec = d.get("comm_priority")
by = d.get("overlap", {}).get("by_priority", {})
if rec not in order:
    sys.exit(f"comm_priority is {rec!r}, expected one of {order}")
if d["overlap"]["comm_priority"] != rec:
    sys.exit("overlap.comm_priority differs from comm_priority")
if rec not in by:
    sys.exit(f"recorded {rec} was not measured ({sorted(by)})")
if d["overlap_rate"] != by[rec]["overlap_rate"]:
    sys.exit("overlap_rate is not the recorded priority's")
# A call's start on compute: the mean of the recorded priority's timed
# calls' enqueue times, absent where no call was timed.
calls = by[rec].get("calls", [])
if calls:
    start = 1e6 * sum(c["start_s"] for c in calls) / len(calls)
    if not all(c["start_s"] >= 0 for c in calls) or \
            abs(d.get("call_compute_us", -1) - start) > 1e-6 * (1 + start):
        sys.exit(f"call_compute_us {d.get('call_compute_us')} is not the mean of "
                 f"the recorded priority's calls' starts, {start} us")
elif "call_compute_us" in d:
    sys.exit("call_compute_us without timed calls")
# oasr-bench's score: the mean of the bytes' overlap rate and the calls'
# rate (the lowest of its timed calls' alone / beside, clamped to [0, 1]; 1
# where --latency-bytes did not measure them), plus the compute rate;
# recomputed here from the parts.
def call_rate(k, v):
    if "calls" not in v:
        return v.get("call_rate", 1.0)
    rates = [min(1.0, max(0.0, c["alone_s"] / c["beside_s"])) if c["beside_s"] > 0 else 1.0
             for c in v["calls"]]
    rate = min(rates, default=1.0)
    if abs(rate - v["call_rate"]) > 1e-9:
        sys.exit(f"{k}: call_rate {v['call_rate']} is not its calls' lowest rate {rate}")
    return rate


score = {k: 0.5 * (v["overlap_rate"] + call_rate(k, v)) + v["compute_rate"]
         for k, v in by.items()}
for k, v in by.items():
    if "score" in v and abs(v["score"] - score[k]) > 1e-9:
        sys.exit(f"{k}: score {v['score']} is not 0.5 (overlap + call rate) + compute rate = {score[k]}")
best = None
comparable = all(v["alone_s"] >= 1e-3 for v in by.values())
if not comparable:
    best = "idle" if "idle" in by else "normal" if "normal" in by else rec
for k in order:
    if comparable and k in score and (best is None or score[k] > score[best] + 0.05):
        best = k
if len(sys.argv) > 3 and sys.argv[2] == "--expect":
    best = sys.argv[3]
if rec != best:
    sys.exit(f"recorded {rec}, but the measurements choose {best}: {score}")
print(f"recorded: {rec} (measured: {', '.join(k for k in order if k in by)})")
