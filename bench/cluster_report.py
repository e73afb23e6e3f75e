"""The Markdown table of a bench/run_cluster.sh results JSON (run_cluster.sh
writes both; rerun this on a kept JSON to rewrite its .md):

    /usr/bin/python3 bench/cluster_report.py bench/results/cluster-X.json > cluster-X.md
"""
import json, statistics, sys
d = json.load(open(sys.argv[1]))
c = d["calibration"]


def model_spread(models):
    """The range of each round's re-measured run model."""
    def span(key, fmt, default=1.0):
        v = [m.get(key, default) for m in models]
        return f"{min(v):{fmt}}-{max(v):{fmt}}"
    return ("; measured anew at the start of every round, its profile then "
            "that round's plans and predictions: over the rounds alpha "
            f"{span('alpha_s', '.3g', 0)} s, beta {span('beta_s_per_byte', '.3g', 0)} s/B, "
            f"overlap rate {span('overlap_rate', '.2f')}, compute rate "
            f"{span('compute_rate', '.2f')}"
            + (f", a call's start {span('call_compute_us', '.0f', 0)} us"
               if any(m.get("call_compute_us") for m in models) else "")
            + "; predicted: the median of the "
            "rounds' predictions, and in brackets the range of each run's "
            "error against its own round's prediction")


loads = [r["load"] for r in d["runs"]]
wire = d.get("grad_dtype", "f32")
precision = d.get("precision", "f32")
print(f"# Emulated cluster: {d['nodes']} nodes at {d['rate']}, {d['model']}"
      + ("" if wire == "f32" else f", gradients in {wire} on the wire")
      + ("" if precision == "f32" else
         f", {precision} mixed precision (oasr --precision={precision}; "
         f"PyTorch torch.autocast {precision})") + "\n")
print(f"{d['date']}, {d['machine']}; load average (1 min) before the runs "
      f"{min(loads):.2f}-{max(loads):.2f}, median {statistics.median(loads):.2f}. "
      f"`scripts/cluster.sh up {d['nodes']} --rate={d['rate']}` ("
      + ("one rank per node" if d.get("ranks", d["nodes"]) == d["nodes"] else
         f"{d['ranks']} ranks, {d['ranks'] // d['nodes']} per node, round-robin")
      + f", rank r pinned to CPU r mod {d.get('cores', 2)}), batch {d['batch']}/rank, 1 compute thread/rank, "
      f"communication thread at {d['comm_priority']} priority; "
      + (f"measured: each run's median of steps 2..{d['steps']} (their mean in "
         "`mean`)" if d.get("step_stat") == "median" else
         f"mean of steps 2..{d['steps']}") + f"; {d['rounds']} rounds, each running every strategy once "
      "(interleaved): the median round and the range. Calibration on the shaped "
      f"link (`oasr-bench comm --burst-us=20000`): alpha = {c['alpha_s']:.3g} s, "
      f"beta = {c['beta_s_per_byte']:.3g} s/B ({1e-6 / c['beta_s_per_byte']:.1f} MB/s), "
      f"overlap rate {c['overlap_rate']:.2f}"
      + ("" if not c.get("two_level") else
         "; two-level tiers ({r} ranks a node): inside the node alpha = "
         "{a:.3g} s, beta = {b:.3g} s/B, between the nodes alpha = {c2:.3g} s, "
         "beta = {d2:.3g} s/B per share byte".format(
             r=c["two_level"]["ranks_per_node"],
             a=c["two_level"]["intra"]["alpha_s"],
             b=c["two_level"]["intra"]["beta_s_per_byte"],
             c2=c["two_level"]["inter"]["alpha_s"],
             d2=c["two_level"]["inter"]["beta_s_per_byte"]))
      + (f", compute rate {c['compute_rate']:.2f}" if c.get("compute_rate") else "")
      + f" (sizes from {d['calib_min_bytes']} B). "
      + ("Predicted: the plan's timeline from "
         "that calibration and a profile measured on the cluster (a separate "
         + ("single-group run: compute alone" if c.get("compute_rate") else "wfbp run")
         + ")" if d.get("model_from", "calibration") != "run" else
         "Predicted: the plan's timeline from what one oasr run measured in "
         "itself (`--replan=" + d.get("profile_replan", "once")
         + " --replan-profile`: its re-plan's profile and "
         "fitted model, alpha = {alpha_s:.3g} s, beta = {beta_s_per_byte:.3g} s/B, "
         "overlap rate {overlap_rate:.2f}, compute rate {compute_rate:.2f}"
         .format(**({"overlap_rate": 1.0, "compute_rate": 1.0} | d["run_model"]))
         + (", a call's start {:.0f} us on compute".format(d["run_model"]["call_compute_us"])
            if d["run_model"].get("call_compute_us") else "")
         + (model_spread(d["run_models"]) if d.get("profile_every_round") else "")
         + "); the calibration above chose the priority, and its alpha is the "
         "floor of the run model's (where a run's allreduces do not resolve the "
         "start-up, the re-planner keeps the plan's alpha: compare the alphas)")
      + "; replayed: the same model on the run's own profile (compute rate 1: "
      "its layer times already ran beside its communication).\n")
def calls(v):
    """(bytes, alone_s, beside_s) of each call a priority's probe timed (an
    older calibration kept one, of 4 KiB)."""
    if "calls" in v:
        return [(x["bytes"], x["alone_s"], x["beside_s"]) for x in v["calls"]]
    if "call_rate" in v:
        return [(4096, v["call_alone_s"], v["call_beside_s"])]
    return []


def call_size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"


bp = c.get("by_priority") or {}
if bp:
    print("Communication thread priority, measured by the calibration (a "
          "16 MiB allreduce beside one busy compute thread per rank): " +
          "; ".join(f"{k}: overlap rate {v['overlap_rate']:.2f}, compute at "
                    f"{100 * v['compute_rate']:.0f} %"
                    + "".join(f", a {call_size(b)} call {1e3 * beside:.2f} ms "
                              f"beside compute against {1e3 * alone:.2f} alone"
                              for b, alone, beside in calls(v))
                    for k, v in bp.items()) +
          f"; the runs used {c.get('comm_priority')}.\n")
torch = next((r["torch"] for r in d["runs"] if r.get("torch")), None)
if torch:
    print(f"PyTorch DDP rows: `bench/ddp_step.py`, PyPI torch {torch} (MKL, oneDNN), "
          "gloo over the same links, the same torchvision model, batch, 1 compute "
          "thread/rank and plain SGD; `torch-ddp:N` is bucket_cap_mb=N "
          "(25: DDP's default; the other: the bucket size oasr-plan predicts "
          f"fastest on this profile, {d.get('ddp_plan_bucket_mb')} MB); groups = "
          "DDP's buckets after its rebuild"
          + ("; broadcast_buffers=False (oasr does not broadcast BatchNorm's "
             "statistics either)" if d.get("ddp_broadcast_buffers") is False else "")
          + (".\n" if d.get("compute_only") else
             "; exposed comm = the step minus the same step under no_sync(), "
             "and for oasr the time its compute thread was blocked: two "
             "definitions, not comparable across the systems (this table "
             "predates run_cluster.sh's compute-only runs).\n"))
# One definition of exposed communication for every system: its step minus
# its own step without communication (oasr: the same ranks under
# --algo=sync-easgd with no exchange in the run; DDP: no_sync()).
oasr_compute = [r["measured_ms"] for r in d.get("compute_only", []) if r["system"] == "oasr"]
one_def = bool(oasr_compute)
if one_def:
    print("Compute only: the same system's step with no communication, on the same "
          "ranks (oasr: `--algo=sync-easgd --easgd-tau=1000000000`, the same executor "
          "without any exchange, median over rounds "
          f"{statistics.median(oasr_compute):.1f} ms, range {min(oasr_compute):.1f}-"
          f"{max(oasr_compute):.1f}; DDP: its no_sync() steps in the same run). Exposed "
          "comm = the measured step minus that, by this one definition for every row; "
          "*blocked* is oasr's own measure, the time its compute thread waited for "
          "communication, which leaves out compute slowed by communication beside it.\n")
means = d.get("step_stat") == "median"
print("| strategy | groups | measured (ms) | range (ms) |" + (" mean (ms) |" if means else "")
      + " predicted (ms) | error | replayed (ms) |"
      + (" compute only (ms) | exposed comm (ms) | blocked (ms) |" if one_def else
         " exposed comm (ms) |") + " runs above load flag |")
print("|---|---|---|---|" + ("---|" if means else "") + "---|---|---|"
      + ("---|---|---|" if one_def else "---|") + "---|")
by = {}
for r in d["runs"]:
    by.setdefault(r["strategy"], []).append(r)
rows = []
for s, rs in by.items():
    ms = sorted(rs, key=lambda r: r["measured_ms"])
    med = ms[(len(ms) - 1) // 2]
    rows.append((s, med, [r["measured_ms"] for r in rs],
                 sum(1 for r in rs if r["load"] > d["load_flag"])))
best = min(rows, key=lambda t: t[1]["measured_ms"])
for s, med, times, flagged in rows:
    rs = by[s]
    lo, hi = min(times), max(times)
    mark = " **fastest**" if s == best[0] else (" (tied)" if lo <= max(best[2]) else "")
    # Predicted: the median of the rounds' predictions (one profile: the
    # same in every round); error: the measured median against it, and
    # where each round had its own profile, the range of each run against
    # its round's prediction.
    preds = [r["predicted_ms"] for r in rs if r.get("predicted_ms")]
    p = statistics.median(preds) if preds else None
    err = f"{(med['measured_ms'] - p) / p * 100:+.1f} %" if p else "n/a"
    if p and d.get("profile_every_round"):
        errs = [(r["measured_ms"] - r["predicted_ms"]) / r["predicted_ms"] * 100
                for r in rs if r.get("predicted_ms")]
        err += f" ({min(errs):+.1f}..{max(errs):+.1f})"
    pred = f"{p:.1f}" if p else "n/a"
    rep = med.get("replayed_ms")
    reps = f"{rep:.1f}" if rep else "n/a"
    mean = (f" {statistics.median(r['mean_ms'] for r in rs):.1f} |"
            if means else "")
    if one_def:
        ddp_compute = [r["compute_only_ms"] for r in rs if r.get("compute_only_ms")]
        comp = statistics.median(ddp_compute or oasr_compute)
        blocked = "n/a" if ddp_compute else f"{med['exposed_comm_ms']:.1f}"
        exposed = (f" {comp:.1f} | {max(med['measured_ms'] - comp, 0.0):.1f} | "
                   f"{blocked} |")
    else:
        exposed = f" {med['exposed_comm_ms']:.1f} |"
    print(f"| {s}{mark} | {med['groups']} | {med['measured_ms']:.1f} | {lo:.1f}-{hi:.1f} |{mean} "
          f"{pred} | {err} | {reps} |{exposed} {flagged}/{len(times)} |")
print(f"\n*(tied)*: its fastest round is faster than the fastest strategy's slowest "
      f"round. Load flag: runs started with the 1-minute load average above "
      f"{d['load_flag']} (the host is shared).")
meds = {s: med["measured_ms"] for s, med, _, _ in rows}
for o in [k for k in ("oasr", "oasr-step") if k in meds]:
    for s in [k for k in meds if k.startswith("torch-ddp:")]:
        print(f"\n{o} against {s}: {meds[s] / meds[o]:.2f}x "
              f"({meds[s]:.1f} / {meds[o]:.1f} ms, medians).", end="")
print()
