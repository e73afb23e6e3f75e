"""Two ranks on one GPU, gradients averaged by MPI through host memory
(oasr-run --device=cuda --comm-backend=mpi: the host-staged allreduce):
oasr's plan against WFBP and one group after backward, as
bench/run_cluster.sh compares the strategies on the CPU cluster.

Used by bench/run_gpu.py --shared-gpu MODEL:BATCH[,...]. Per model, one
profile run first: `--strategy=oasr` over 2 x STEPS steps re-planning once
from its own steps (--replan=every:2xSTEPS-1) and writing that profile with
its fitted allreduce model (--replan-profile); every strategy is then
planned from it (--plan-profile, --replan=off), so the predictions of all of
them come from one measured model, as run_cluster.sh's MODEL_FROM=run.
Each strategy's row: the median step after the first, the plan's groups,
the summary's exposed communication (the compute thread's time blocked in
allreduce waits) and hidden share, the prediction and its error against
the measured median. The ranks run with --bind-to none (Open MPI binds 2
ranks to one core each otherwise, and the communication thread's host
averages would share it with the kernel launches).

The per-instruction profile of a GPU run is timed on the host: kernels are
launched asynchronously, so backward's layers look as long as their
launches, and an allreduce's time includes its wait for the compute
stream. The prediction error measured here is that of this profile, not
yet of a device-timed one.
"""
import os
import re
import shlex
import statistics

STRATEGIES = ["oasr", "wfbp", "single"]

SUMMARY_RE = re.compile(r"mean iteration\s+([0-9.]+) ms \(median ([0-9.]+) ms, "
                        r"range ([0-9.]+)-([0-9.]+) ms")
EXPOSED_RE = re.compile(r"exposed comm\s+([0-9.]+) ms .*?([0-9]+)% (?:of "
                        r"communicating )?hidden")
BUSY_RE = re.compile(r"allreduce busy ([0-9.]+) ms")
PREDICTED_RE = re.compile(r"predicted\s+([0-9.]+) ms \(measured/predicted "
                          r"([0-9.]+)")
GROUPS_RE = re.compile(r"strategy (\S+), ([0-9]+) group\(s\)")
COMM_RE = re.compile(r"rank\(s\) \[([a-z-]+)\]")


def launcher(a):
    return shlex.split(a.mpirun) + ["-np", "2", "--bind-to", "none"]


def oasr_cmd(a, exported, batch, steps, extra):
    return launcher(a) + [
        a.oasr_run, exported["onnx"], "--device=cuda", "--comm-backend=mpi",
        f"--batch={batch}", f"--steps={steps}", f"--data={exported['data']}",
        "--lr=0.01", f"--log-every={steps}"] + extra


def parse(out):
    r = {}
    if m := SUMMARY_RE.search(out):
        r.update(mean_ms=float(m.group(1)), median_ms=float(m.group(2)),
                 min_ms=float(m.group(3)), max_ms=float(m.group(4)))
    if m := EXPOSED_RE.search(out):
        r.update(exposed_comm_ms=float(m.group(1)), hidden_pct=float(m.group(2)))
    if m := BUSY_RE.search(out):
        r["allreduce_busy_ms"] = float(m.group(1))
    if m := PREDICTED_RE.search(out):
        r["predicted_ms"] = float(m.group(1))
    if m := GROUPS_RE.search(out):
        r["groups"] = int(m.group(2))
    if m := COMM_RE.search(out):
        r["communicator"] = m.group(1)
    if "median_ms" in r and r.get("predicted_ms"):
        r["prediction_error"] = r["predicted_ms"] / r["median_ms"] - 1
    return r


def bench(a, env, run, tail, model, batch, exported):
    """The profile run and one round of every strategy per --rounds, in
    order; returns {"profile": ..., "runs": {strategy: [run, ...]}}."""
    res = {"model": model, "batch": batch, "runs": {s: [] for s in STRATEGIES}}
    if "onnx" not in exported:
        res["error"] = "not exported"
        return res
    profile = os.path.join(a.work, f"shared-{model}-{batch}-profile.json")
    if os.path.exists(profile):
        os.remove(profile)
    steps = 2 * a.steps
    cmd = oasr_cmd(a, exported, batch, steps,
                   ["--strategy=oasr", f"--replan=every:{steps - 1}",
                    f"--replan-profile={profile}"])
    rc, out = run(cmd, a.timeout, env)
    res["profile"] = {"cmd": " ".join(cmd), "rc": rc, **parse(out)}
    plan = ["--replan=off"]
    if rc == 0 and os.path.exists(profile):
        plan.append(f"--plan-profile={profile}")
    else:
        res["profile"]["error"] = tail(out, 14)
    print(f"shared-gpu {model}/{batch} profile: "
          f"{res['profile'].get('median_ms', 'FAILED')} ms", flush=True)
    for rnd in range(a.rounds):
        for s in STRATEGIES:
            cmd = oasr_cmd(a, exported, batch, a.steps, [f"--strategy={s}"] + plan)
            rc, out = run(cmd, a.timeout, env)
            r = {"cmd": " ".join(cmd), "rc": rc, **parse(out)}
            if rc != 0 or "median_ms" not in r:
                r["error"] = tail(out, 14)
            r["log_tail"] = tail(out, 16)
            res["runs"][s].append(r)
            print(f"shared-gpu round {rnd + 1} {model}/{batch} {s}: "
                  f"{r.get('median_ms', 'FAILED')} ms (predicted "
                  f"{r.get('predicted_ms', 'n/a')}, exposed "
                  f"{r.get('exposed_comm_ms', 'n/a')} ms)", flush=True)
    return res


def median_of(runs, key):
    xs = [r[key] for r in runs if key in r]
    return statistics.median(xs) if xs else None


def markdown(results):
    """The table of every model's strategies (median over the rounds)."""
    lines = [
        "## Two ranks on one GPU (MPI through host memory)", "",
        "oasr-run --device=cuda --comm-backend=mpi on 2 ranks sharing the "
        "GPU (bench/gpu_shared.py): each plan from one profile run's measured "
        "profile and fitted allreduce model. Step: median after the first "
        "(median over the rounds). Exposed: the compute thread blocked in "
        "allreduce waits per step; hidden: the summary's share of "
        "communicating that compute did not wait for. Error: predicted / "
        "measured - 1 (the profile's times are host-timed).", "",
        "| model | batch | strategy | groups | step ms | exposed comm ms | "
        "hidden | predicted ms | error |",
        "|---|---|---|---|---|---|---|---|---|"]
    failed = []
    for res in results:
        for s, runs in res["runs"].items():
            med = median_of(runs, "median_ms")
            pred = median_of(runs, "predicted_ms")
            exp = median_of(runs, "exposed_comm_ms")
            hid = median_of(runs, "hidden_pct")
            groups = next((r["groups"] for r in runs if "groups" in r), "")

            def f(x, fmt="{:.1f}"):
                return fmt.format(x) if x is not None else "n/a"
            err = f"{100 * (pred / med - 1):+.1f}%" if med and pred else "n/a"
            lines.append(
                f"| {res['model']} | {res['batch']} | {s} | {groups} | "
                f"{f(med)} | {f(exp)} | {f(hid, '{:.0f}%')} | {f(pred)} | "
                f"{err} |")
            failed += [(f"{res['model']}/{res['batch']} {s}", r["error"])
                       for r in runs if "error" in r]
        if "error" in res.get("profile", {}):
            failed.append((f"{res['model']}/{res['batch']} profile",
                           res["profile"]["error"]))
        if "error" in res:
            failed.append((f"{res['model']}/{res['batch']}", res["error"]))
    if failed:
        lines += ["", "Failed runs:", ""]
        for k, e in failed:
            lines += [f"- {k}:", "", "```", e, "```"]
    return lines
