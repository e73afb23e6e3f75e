"""Checks the communication priority an `oasr-bench comm` calibration
records: every candidate it measured is under overlap.by_priority, and
comm_priority is the one that kept more work going (overlap rate + compute
rate), idle staying on a tie within 0.05 -- or the single candidate.

    check_comm_priority.py CALIBRATION.json [--expect idle|normal]
Prints "recorded: PRIORITY (measured: ...)" or exits 1 naming the mismatch.
"""
import json
import sys

d = json.load(open(sys.argv[1]))
rec = d.get("comm_priority")
by = d.get("overlap", {}).get("by_priority", {})
if rec not in ("idle", "normal"):
    sys.exit(f"comm_priority is {rec!r}, expected idle or normal")
if d["overlap"]["comm_priority"] != rec:
    sys.exit("overlap.comm_priority differs from comm_priority")
if rec not in by:
    sys.exit(f"recorded {rec} was not measured ({sorted(by)})")
if d["overlap_rate"] != by[rec]["overlap_rate"]:
    sys.exit("overlap_rate is not the recorded priority's")
score = {k: v["overlap_rate"] + v["compute_rate"] for k, v in by.items()}
best = "idle" if "idle" in score else "normal"
if "normal" in score and "idle" in score and score["normal"] > score["idle"] + 0.05:
    best = "normal"
if len(sys.argv) > 3 and sys.argv[2] == "--expect":
    best = sys.argv[3]
if rec != best:
    sys.exit(f"recorded {rec}, but the measurements choose {best}: {score}")
print(f"recorded: {rec} (measured: {', '.join(sorted(by))})")
