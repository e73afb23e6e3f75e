#!/usr/bin/python3
"""Faults on the emulated cluster: packet loss, link blips and a cut link,
oasr against PyTorch DDP over gloo.

    bench/run_faults.py [--build BUILD] [--model resnet18] [--batch 4]
                        [--steps 16] [--rounds 2] [--rate 1gbit]
                        [--loss 0,0.001,0.01] [--blips 5,7,60] [--name NAME]
                        [--ddp-python /root/venv-torch/bin/python]
                        [--ddp-cap 300]

On 2 nodes of scripts/cluster.sh (one rank each):
- packet loss: `cluster.sh loss P` (every node drops P of the packets it
  sends), then the same oasr-run job (MODEL, --steps, re-planning on by
  default) at each P, alternating within each round; the median step and
  the re-planner's fitted alpha/beta;
- link blips: the second node's switch port down for D seconds while oasr's
  test MLP trains (--timeout=30): whether the run went on, and how long it
  took to stop when it did not;
- a cut link: the same port down for good, for oasr-run (--timeout=30) and
  for bench/ddp_fault.py launched on each node directly (as torchrun would:
  no mpirun whose daemons notice the cut), with gloo's default timeout and
  with timeout=60 s; the seconds until each process exits and its message
  (DDP is killed after --ddp-cap seconds if it is still waiting).
Needs root. Writes bench/results/NAME.json and .md (NAME:
faults-2xRATE-DATE); never overwrites.
"""
import argparse
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

import results_io

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
STEP_RE = re.compile(r"mean iteration\s+([0-9.]+) ms \(median ([0-9.]+) ms")
REPLAN_RE = re.compile(r"replan after step \d+: .*?alpha ([^ ]+) s(?: \(the plan's\))?, "
                       r"beta ([^ ,]+) s/B")


def load():
    return open("/proc/loadavg").read().split()[0]


class Cluster:
    def __init__(self, rate):
        self.name = "flt%d" % (os.getpid() % 100000)
        self.env = dict(os.environ, OASR_CLUSTER=self.name)
        up = self.sh("up", "2", f"--rate={rate}")
        if up.returncode != 0:
            sys.exit("run_faults: cluster.sh up failed:\n" + up.stderr)

    def sh(self, *args, **kw):
        return subprocess.run([CLUSTER, *args], env=self.env, capture_output=True,
                              text=True, **kw)

    def dropped(self):
        """Packets the nodes' drop rules dropped, and packets their eth0
        sent, since the last `loss`."""
        drop = sent = 0
        for n in range(2):
            ns = f"{self.name}-n{n}"
            rules = subprocess.run(["ip", "netns", "exec", ns, "iptables", "-L", "OUTPUT",
                                    "-v", "-x", "-n"], capture_output=True, text=True).stdout
            drop += sum(int(l.split()[0]) for l in rules.splitlines() if " DROP " in l)
            sent += int(subprocess.run(["ip", "netns", "exec", ns, "cat",
                                        "/sys/class/net/eth0/statistics/tx_packets"],
                                       capture_output=True, text=True).stdout)
        return drop, sent

    def port(self, up):
        subprocess.run(["ip", "-n", self.name + "-sw", "link", "set", "p1",
                        "up" if up else "down"], check=True)

    def down(self):
        self.sh("down")


def timed_job(cmd, env, cut_after, down_for, cluster):
    """Runs `cmd` (a Popen list), takes the link down `cut_after` s after the
    start for `down_for` s (None: for good); returns (exit status, seconds
    from the cut to the exit, whether it was running when the link came
    back, output)."""
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    time.sleep(cut_after)
    cluster.port(False)
    cut = time.monotonic()
    back = None
    while job.poll() is None and (down_for is None or time.monotonic() - cut < down_for):
        time.sleep(0.2)
    if down_for is not None:
        cluster.port(True)
        back = job.poll() is None
    out, _ = job.communicate()
    if down_for is None:
        cluster.port(True)
    return job.returncode, time.monotonic() - cut, back, out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--loss", default="0,0.001,0.01")
    p.add_argument("--blips", default="5,7,60")
    p.add_argument("--ddp-python", default="/root/venv-torch/bin/python")
    p.add_argument("--ddp-cap", type=float, default=300)
    p.add_argument("--name", default="")
    a = p.parse_args()
    date = datetime.datetime.now(datetime.timezone.utc)
    name = a.name or f"faults-2x{a.rate}-{date:%Y-%m-%d}"
    out = results_io.new_results(p, name)
    bin_dir = os.path.join(a.build, "bin")
    onnx, = results_io.exported_models(a.build, a.model)
    work = os.path.join(a.build, "bench-faults")
    os.makedirs(work, exist_ok=True)
    mlp = os.path.join(work, "mlp.mlir")
    with open(mlp, "w") as f:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "test", "runtime", "Inputs",
                                                         "gen_mlp.py"),
                        "--groups", "wfbp", "--hidden", "64"], stdout=f, check=True)
    oasr = os.path.join(bin_dir, "oasr-run")
    loads = [load()]
    res = {"benchmark": "faults", "date": date.isoformat(timespec="minutes"),
           "machine": {"cores": os.cpu_count()}, "rate": a.rate,
           "command": "bench/run_faults.py " + " ".join(sys.argv[1:])}
    cluster = Cluster(a.rate)
    try:
        # Packet loss.
        losses = [x for x in a.loss.split(",") if x]
        runs = {}
        for r in range(a.rounds):
            for loss in losses:
                cluster.sh("loss", loss)
                _, sent0 = cluster.dropped()
                run = cluster.sh("run", "2", "--", oasr, onnx, f"--batch={a.batch}",
                                 f"--steps={a.steps}", "--threads=1",
                                 f"--log-every={a.steps}")
                m = STEP_RE.search(run.stdout)
                rp = REPLAN_RE.search(run.stdout)
                rec = {"status": run.returncode,
                       "median_ms": float(m.group(2)) if m else None,
                       "alpha_s": float(rp.group(1)) if rp else None,
                       "beta_s_per_byte": float(rp.group(2)) if rp else None,
                       "replan": next((l for l in run.stdout.splitlines()
                                       if l.startswith("replan after")), "")}
                drop, sent1 = cluster.dropped()
                rec["packets_dropped"], rec["packets_sent"] = drop, sent1 - sent0
                if not m:
                    rec["tail"] = (run.stdout + run.stderr)[-1500:]
                runs.setdefault(loss, []).append(rec)
                print(f"round {r + 1} loss {loss}: {rec['median_ms']} ms, "
                      f"alpha {rec['alpha_s']} beta {rec['beta_s_per_byte']}", flush=True)
            loads.append(load())
        cluster.sh("loss", "0")
        res["model"], res["batch"], res["steps"], res["rounds"] = (
            a.model, a.batch, a.steps, a.rounds)
        res["loss"] = runs

        # Blips and the cut, oasr.
        # 30000 steps: about 25 s without a fault, so a blip at 4 s ends
        # well before the run does.
        mlp_cmd = [CLUSTER, "run", "2", "--", oasr, mlp, "--threads=1",
                   "--log-every=1000000000", "--timeout=30"]
        blips = []
        for d in [float(x) for x in a.blips.split(",") if x]:
            rc, took, back, text = timed_job(mlp_cmd + ["--steps=30000"], cluster.env,
                                             4, d, cluster)
            stop = next((l for l in text.splitlines() if "oasr-run: rank 0" in l), "")
            blips.append({"down_s": d, "went_on": bool(back) and rc == 0,
                          "stopped_after_s": None if back else round(took, 1),
                          "status": rc, "rank0": stop,
                          "longest_step": next((l.strip() for l in text.splitlines()
                                                if "mean iteration" in l), "")})
            print(f"blip {d} s: {'went on' if back else f'stopped after {took:.1f} s'}",
                  flush=True)
            loads.append(load())
        res["blips"] = blips
        rc, took, _, text = timed_job(mlp_cmd + ["--steps=100000000"], cluster.env, 4,
                                      None, cluster)
        res["cut"] = {"oasr": {"status": rc, "exit_after_s": round(took, 1),
                               "rank0": next((l for l in text.splitlines()
                                              if "oasr-run: rank 0" in l), "")}}
        print(f"cut, oasr: exit after {took:.1f} s", flush=True)

        # The cut, DDP: each node's rank started directly in its namespace.
        for label, timeout in (("ddp-timeout-60s", 60), ("ddp-default-timeout", None)):
            procs = []
            for r in range(2):
                env = dict(os.environ, RANK=str(r), WORLD_SIZE="2",
                           PYTHONPATH=os.path.join(ROOT, "bench"))
                cmd = ["ip", "netns", "exec", f"{cluster.name}-n{r}", a.ddp_python,
                       os.path.join(ROOT, "bench", "ddp_fault.py"), "--master", "10.77.0.1",
                       "--port", str(29600 + len(res["cut"]))]
                if timeout:
                    cmd += ["--timeout", str(timeout)]
                procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True))
            time.sleep(12)  # rendezvous and some steps
            cluster.port(False)
            cut = time.monotonic()
            exits = [None, None]
            while any(e is None for e in exits) and time.monotonic() - cut < a.ddp_cap:
                for r, pr in enumerate(procs):
                    if exits[r] is None and pr.poll() is not None:
                        exits[r] = round(time.monotonic() - cut, 1)
                time.sleep(0.5)
            for pr in procs:
                if pr.poll() is None:
                    pr.send_signal(signal.SIGKILL)
            cluster.port(True)
            texts = [pr.communicate()[0] for pr in procs]
            res["cut"][label] = {
                "timeout_s": timeout, "cap_s": a.ddp_cap,
                "exit_after_s": exits,
                "messages": [next((l for l in t.splitlines() if "error" in l), "")[:300]
                             for t in texts],
                "steps_before": [max([int(x) for x in re.findall(r"step (\d+)", t)] or [0])
                                 for t in texts]}
            print(f"cut, {label}: exits {exits}", flush=True)
            loads.append(load())
    finally:
        cluster.sh("loss", "0")
        cluster.down()
    res["machine"]["load_1min"] = loads
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)

    lines = [f"# Faults on 2 emulated nodes at {a.rate}: packet loss, link blips, a cut link", "",
             f"{res['date']}, {os.cpu_count()} cores, load (1 min) {', '.join(loads)}. "
             f"Produced by `{res['command']}`.", "",
             f"## Packet loss ({a.model}, batch {a.batch}/rank, {a.steps} steps, "
             f"{a.rounds} rounds alternating)", "",
             "Every node drops the fraction of the packets it sends (iptables' statistic "
             "match, `cluster.sh loss`). Step: median over rounds of oasr-run's median step "
             "[fastest - slowest round]. Alpha and beta: the re-planner's fit after step 5, "
             "per round.", "",
             "| dropped | packets dropped / sent | step (ms) | against no loss | "
             "re-planner's alpha (s) | beta (s/B) |",
             "|---|---|---|---|---|---|"]
    base = None
    for loss in losses:
        v = [x["median_ms"] for x in runs[loss] if x["median_ms"]]
        if not v:
            lines.append(f"| {loss} | | failed | | | |")
            continue
        med = statistics.median(v)
        base = base or med
        al = ", ".join(f"{x['alpha_s']:.3g}" for x in runs[loss] if x["alpha_s"] is not None)
        be = ", ".join(f"{x['beta_s_per_byte']:.3g}" for x in runs[loss]
                       if x["beta_s_per_byte"] is not None)
        pk = ", ".join(f"{x['packets_dropped']}/{x['packets_sent']}" for x in runs[loss])
        lines.append(f"| {float(loss) * 100:g} % | {pk} | {med:.1f} [{min(v):.1f}-{max(v):.1f}] | "
                     f"{med / base:.2f}x | {al or 'no re-plan line'} | {be} |")
    lines += ["", "## Link blips (oasr's test MLP, --timeout=30)", "",
              "The second node's switch port down for the time given, then up.", "",
              "| down for | outcome |", "|---|---|"]
    for b in blips:
        lines.append(f"| {b['down_s']:g} s | " + (
            f"training went on and finished ({b['longest_step']})" if b["went_on"] else
            (f"stopped {b['stopped_after_s']} s into the cut" if b["stopped_after_s"]
             is not None else "stopped after the link came back") +
            f" (status {b['status']}): {b['rank0'][:160]}") + " |")
    lines += ["", "## A cut link", "",
              "| job | exits after the cut | what it printed |", "|---|---|---|"]
    o = res["cut"]["oasr"]
    lines.append(f"| oasr-run under mpirun (cluster.sh run), --timeout=30 | {o['exit_after_s']} s "
                 f"(status {o['status']}) | {o['rank0'][:200]} |")
    for label in ("ddp-timeout-60s", "ddp-default-timeout"):
        c = res["cut"][label]
        ex = ", ".join(f"rank {r}: " + (f"{e} s" if e is not None else
                                        f"still waiting at {c['cap_s']:g} s (killed)")
                       for r, e in enumerate(c["exit_after_s"]))
        msg = " / ".join(m for m in c["messages"] if m) or "nothing"
        lines.append(f"| DDP gloo, each node's rank started directly, "
                     f"{'timeout=60 s' if c['timeout_s'] else 'default timeout (30 min)'} | "
                     f"{ex} | {msg[:300]} |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
