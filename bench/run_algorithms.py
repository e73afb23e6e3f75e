#!/usr/bin/python3
"""Training algorithms side by side: Sync SGD, Sync EASGD, and the
parameter-server family (Async/Hogwild SGD and EASGD, Async MSGD/MEASGD) on
the 8x8 digits (python3-sklearn), same MLP, same steps, same data shards.

    bench/run_algorithms.py [--build BUILD] [--ranks 2] [--steps 600]
                            [--reps 3] [--hidden 1024] [--tau 4] [--lr 0.05]
                            [--ps-server shared|dedicated]
                            [--model mlp|cnn] [--data DIR]
                            [--nodes N --rate RATE | --launch PREFIX]
                            [--eval-every N] [--target-accuracy A]

Per algorithm: the median of REPS runs (rounds interleaved, so a slow spell
of the host does not land on one algorithm) of the mean iteration time, the
time blocked in communication, the wall time of the run and the test
accuracy the final weights reach. Writes bench/results/algorithms.{json,md}
(algorithms-dedicated.* with --ps-server dedicated: the parameter-server
forms then serve from the last rank, which trains nothing).

On the emulated cluster (docs/cluster.md): `--nodes N --rate RATE` brings a
cluster named `algos` up with N nodes and links shaped to RATE
(scripts/cluster.sh), launches every run there with one rank per node
(`cluster.sh run N --`), and takes it down at the end; `--launch PREFIX`
runs under another launcher instead (a command prefix, words split as by
a shell). `--model cnn` trains a small CNN (scripts/export_models.py's
cifar_cnn: 0.55 M parameters, 2.2 MB of f32 gradients) on data in the
CIFAR-10 binary format: `--data DIR`, else a set that
scripts/gen_cifar_like.py generates (not CIFAR-10). `--eval-every N`
(oasr-run's) records the test accuracy during the run, and the report
gives the time to `--target-accuracy`. Those runs write
bench/results/algorithms-cluster-MODEL-NxRATE.{json,md} (MODEL-local-Pranks
without a cluster, MODEL-launch with --launch).
"""
import shlex
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"

# (algorithm, optimizer in the module): the momentum forms need momentum;
# the rest run plain SGD, so each pair in the SC'17 comparison differs only
# in the algorithm.
ALGOS = [("sync-sgd", "sgd"), ("sync-easgd", "sgd"),
         ("async-sgd", "sgd"), ("async-easgd", "sgd"),
         ("hogwild-sgd", "sgd"), ("hogwild-easgd", "sgd"),
         ("roundrobin-easgd", "sgd"),
         ("async-msgd", "momentum"), ("async-measgd", "momentum")]


NOTES = """
## Reading these numbers

* The elastic forms exchange every tau = 4 steps, their SGD counterparts
  every step, so per step they block on communication about 5x less; the
  pairs reach test accuracies within about a point of each other at the same
  step count. This is the SC'17 comparison (Async EASGD vs Async SGD, Async
  MEASGD vs Async MSGD, Hogwild EASGD vs Hogwild SGD) at toy scale: one
  host, 2 cores, so an "exchange" is a shared-memory round trip to rank 0's
  server thread, which shares the cores with both ranks' compute.
* Sync EASGD is one allreduce of the parameters every tau steps and has no
  server round trip; it is the fastest per step here, as in the paper.
* The parameter-server forms are not deterministic (requests are served as
  they arrive); the accuracy ranges show how much that moves the result.
* The model is small (75 k parameters, 0.3 MB), so the per-step times are
  a fraction of a millisecond and the run's wall time is mostly start-up.
"""


NOTES_DEDICATED = """
## Reading these numbers

* The parameter-server forms train on P - 1 ranks and serve from the last;
  the sync forms have no server and train on all P ranks. On this 2-core
  host 3 ranks oversubscribe the cores, so compare the parameter-server rows
  with each other and with algorithms.md (2 ranks, server threads on rank 0,
  which also trains), not with the sync rows here.
* A server with a rank of its own answers the every-step SGD forms sooner:
  they block ~0.44-0.52 ms per step here against ~0.73-0.86 ms with the
  server threads beside rank 0's compute (algorithms.md). The elastic forms,
  which exchange every 4 steps, block about as long either way (~0.18-0.23
  ms here, ~0.15-0.17 ms there): their server is rarely busy, and here the
  3 ranks share 2 cores.
"""


def field(pattern, text, what):
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"run_algorithms: no {what} in oasr-run's output:\n{text}")
    return float(m.group(1))


def evals(text):
    """(step, seconds, accuracy) of every --eval-every line."""
    return [(int(m.group(1)), float(m.group(2)), float(m.group(3)) / 100)
            for m in re.finditer(r"eval step (\d+)  time ([0-9.]+) s  test accuracy "
                                 r"([0-9.]+)%", text)]


def time_to(curve, target):
    """Seconds (and step) of the first evaluation at or above target."""
    for step, secs, acc in curve:
        if acc >= target:
            return secs, step
    return None, None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--tau", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--ps-server", default="shared", choices=["shared", "dedicated"])
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"],
                   help="mlp: the digits MLP; cnn: cifar_cnn on CIFAR-10-format data")
    p.add_argument("--data", help="--model cnn: a CIFAR-10 binary directory "
                   "(default: generated by scripts/gen_cifar_like.py)")
    p.add_argument("--batch", type=int, default=32, help="--model cnn: batch per rank")
    p.add_argument("--nodes", type=int, help="run on an emulated cluster of N nodes")
    p.add_argument("--rate", default="200mbit", help="with --nodes: the links' rate")
    p.add_argument("--launch", help="a launcher prefix instead of mpirun --oversubscribe")
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--target-accuracy", type=float, default=0.5)
    p.add_argument("--momentum", type=float, default=0.9,
                   help="--model cnn: the momentum forms' momentum (at lr x (1 - momentum))")
    p.add_argument("--render", metavar="JSON",
                   help="only rewrite JSON's .md from it (its 'notes' text, if any, "
                   "becomes the end of the report)")
    a = p.parse_args()
    if a.render:
        with open(a.render) as f:
            doc = json.load(f)
        doc["results"] = summarize({r["algorithm"]: r["runs"] for r in doc["results"]})
        return write_report(doc, os.path.splitext(a.render)[0])
    if a.nodes is not None and a.launch:
        sys.exit("run_algorithms: --nodes and --launch exclude each other")
    if a.nodes is not None and a.nodes < 1:
        sys.exit("run_algorithms: --nodes must be >= 1")
    if a.eval_every < 0:
        sys.exit("run_algorithms: --eval-every must be >= 0")
    if a.model == "mlp" and a.nodes is None and not a.launch and not a.eval_every:
        return digits_main(a)
    return cluster_main(a)


def digits_modules(work, hidden, lr):
    """The digits in IDX under WORK and the MLP module for each optimizer."""
    digits = os.path.join(work, "digits")
    if not os.path.isdir(digits):
        subprocess.run([PY, os.path.join(ROOT, "scripts", "make_digits.py"), digits],
                       check=True, stdout=subprocess.DEVNULL)
    modules = {}
    for opt in ("sgd", "momentum"):
        path = os.path.join(work, f"mlp-{opt}.mlir")
        with open(path, "w") as f:
            subprocess.run([PY, os.path.join(ROOT, "test", "runtime", "Inputs", "gen_mlp.py"),
                            "--groups", "wfbp", "--hidden", str(hidden), "--optimizer", opt,
                            "--lr", str(lr)], check=True, stdout=f)
        modules[opt] = path
    return digits, modules


def digits_main(a):
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = os.path.join(a.build, "bench-algorithms")
    os.makedirs(work, exist_ok=True)
    digits, modules = digits_modules(work, a.hidden, a.lr)

    runs = {name: [] for name, _ in ALGOS}
    for rep in range(a.reps):
        for name, opt in ALGOS:
            cmd = ["mpirun", "--oversubscribe", "-np", str(a.ranks),
                   os.path.join(a.build, "bin", "oasr-run"), modules[opt],
                   f"--algo={name}", f"--easgd-tau={a.tau}", f"--data=mnist:{digits}",
                   f"--steps={a.steps}", "--threads=1", "--quiet"]
            if a.ps_server == "dedicated" and not name.startswith("sync"):
                cmd.append("--ps-server=dedicated")
            t0 = time.monotonic()
            r = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - t0
            if r.returncode:
                sys.exit(f"run_algorithms: {' '.join(cmd)} failed:\n{r.stderr}")
            out = r.stdout
            runs[name].append({
                "iteration_ms": field(r"mean iteration\s+([0-9.]+) ms", out, "iteration"),
                "blocked_ms": field(r"exposed comm\s+([0-9.]+) ms", out, "exposed comm"),
                "test_accuracy": field(r"test accuracy\s+([0-9.]+)%", out, "accuracy") / 100,
                "wall_s": wall})
            print(f"round {rep + 1}/{a.reps} {name}: {runs[name][-1]}", flush=True)

    results = []
    for name, opt in ALGOS:
        rs = runs[name]
        med = lambda k: statistics.median(x[k] for x in rs)
        results.append({"algorithm": name, "optimizer": opt,
                        "iteration_ms": med("iteration_ms"),
                        "iteration_range_ms": [min(x["iteration_ms"] for x in rs),
                                               max(x["iteration_ms"] for x in rs)],
                        "blocked_ms": med("blocked_ms"), "wall_s": med("wall_s"),
                        "test_accuracy": med("test_accuracy"),
                        "accuracy_range": [min(x["test_accuracy"] for x in rs),
                                           max(x["test_accuracy"] for x in rs)]})
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    doc = {"benchmark": "algorithms",
           "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores, {cpu}, "
                      f"load {os.getloadavg()[0]:.2f}",
           "ranks": a.ranks, "steps": a.steps, "reps": a.reps, "hidden": a.hidden,
           "tau": a.tau, "lr": a.lr, "batch_per_rank": 16, "ps_server": a.ps_server,
           "results": results}
    suffix = "" if a.ps_server == "shared" else "-dedicated"
    out_dir = os.path.join(ROOT, "bench", "results")
    with open(os.path.join(out_dir, f"algorithms{suffix}.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = ["# Training algorithms: Sync SGD, Sync EASGD and the parameter-server family\n",
             f"{doc['date']}, {doc['machine']}; `bench/run_algorithms.py`: the digits "
             f"(1438 train / 359 test, 8x8), MLP 64-{a.hidden}-10, batch 16/rank, "
             f"{a.ranks} ranks, {a.steps} steps, lr {a.lr}, tau {a.tau} for the elastic "
             f"forms, alpha 0.9/P (P: the ranks that train), parameter server "
             f"{'on rank 0, which also trains' if a.ps_server == 'shared' else 'on the last rank, which only serves'}. "
             f"Median of {a.reps} interleaved rounds (range in "
             "brackets). *Blocked*: time per step the compute thread waited on "
             "communication (allreduces or exchanges).\n",
             "| algorithm | optimizer | iteration (ms) | blocked (ms) | run wall (s) | test accuracy |",
             "|---|---|---|---|---|---|"]
    for r in results:
        lo, hi = r["iteration_range_ms"]
        alo, ahi = r["accuracy_range"]
        lines.append(f"| {r['algorithm']} | {r['optimizer']} | {r['iteration_ms']:.3f} "
                     f"[{lo:.3f}-{hi:.3f}] | {r['blocked_ms']:.3f} | {r['wall_s']:.2f} | "
                     f"{100 * r['test_accuracy']:.1f} % [{100 * alo:.1f}-{100 * ahi:.1f}] |")
    lines += ["", (NOTES if a.ps_server == "shared" else NOTES_DEDICATED).strip()]
    with open(os.path.join(out_dir, f"algorithms{suffix}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
CLUSTER_NAME = "algos"


def load_now():
    return round(os.getloadavg()[0], 2)


def summarize(runs):
    """Per algorithm (ALGOS' order): medians and ranges over the rounds."""
    results = []
    for name, opt in ALGOS:
        rs = runs[name]
        med = lambda k: statistics.median(x[k] for x in rs)
        span = lambda k: [min(x[k] for x in rs), max(x[k] for x in rs)]
        reached = [x["time_to_target_s"] for x in rs if x["time_to_target_s"] is not None]
        results.append({"algorithm": name, "optimizer": opt,
                        "iteration_ms": med("iteration_ms"),
                        "iteration_range_ms": span("iteration_ms"),
                        "blocked_ms": med("blocked_ms"), "comm_share": med("comm_share"),
                        "comm_share_range": span("comm_share"),
                        "time_to_target_s": statistics.median(reached) if reached else None,
                        "time_to_target_range_s": [min(reached), max(reached)] if reached else None,
                        "reached": len(reached),
                        "test_accuracy": med("test_accuracy"),
                        "accuracy_range": span("test_accuracy"),
                        "wall_s": med("wall_s"), "runs": rs})
    return results


def cluster_main(a):
    """Every algorithm on a launcher (an emulated cluster, or mpirun on this
    host), with the test accuracy recorded during the run."""
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = os.path.join(a.build, "bench-algorithms")
    os.makedirs(work, exist_ok=True)
    ranks = a.nodes if a.nodes else a.ranks
    common = [f"--steps={a.steps}", "--threads=1", "--quiet", f"--easgd-tau={a.tau}"]
    if a.eval_every:
        common.append(f"--eval-every={a.eval_every}")
    if a.model == "cnn":
        models = os.path.join(work, "models")
        subprocess.run([PY, os.path.join(ROOT, "scripts", "export_models.py"), models,
                        "--models", "cifar_cnn"], check=True, stderr=subprocess.DEVNULL)
        model = os.path.join(models, "cifar_cnn.onnx")
        data_dir = os.path.abspath(a.data) if a.data else os.path.join(work, "cifar-like")
        if not a.data and not os.path.exists(os.path.join(data_dir, "test_batch.bin")):
            subprocess.run([PY, os.path.join(ROOT, "scripts", "gen_cifar_like.py"), data_dir],
                           check=True, stdout=subprocess.DEVNULL)
        # The momentum forms at lr (1 - momentum): the same step size in the
        # long run as plain SGD at lr.
        modules = {"sgd": [model, f"--lr={a.lr}"],
                   "momentum": [model, "--optimizer=momentum", f"--momentum={a.momentum}",
                                f"--lr={a.lr * (1 - a.momentum):g}"]}
        common += [f"--batch={a.batch}", f"--data=cifar10:{data_dir}"]
        data_desc = (f"`{a.data}`" if a.data else
                     "generated CIFAR-10-format data (scripts/gen_cifar_like.py: 10 classes of "
                     "coloured gratings and shapes with noise and jitter, 10000 train / 2000 "
                     "test 32x32x3 records; NOT CIFAR-10)")
        model_desc = ("cifar_cnn (scripts/export_models.py: conv 3-32, conv 32-64, each 3x3 "
                      "with ReLU and 2x2 max-pool, fc 4096-128-10; 0.55 M parameters, 2.2 MB "
                      f"of f32 weights), batch {a.batch}/rank")
    else:
        digits, paths = digits_modules(work, a.hidden, a.lr)
        modules = {opt: [path] for opt, path in paths.items()}
        common.append(f"--data=mnist:{digits}")
        data_desc = "the digits (1438 train / 359 test, 8x8)"
        model_desc = f"MLP 64-{a.hidden}-10, batch 16/rank"

    if a.nodes:
        prefix = [CLUSTER, f"--name={CLUSTER_NAME}", "run", str(ranks), "--"]
        where = (f"emulated cluster: {a.nodes} node(s) (network namespaces, one rank each, "
                 f"rank r pinned to CPU r mod {os.cpu_count()}), links shaped to {a.rate} "
                 "(scripts/cluster.sh)")
        tag = f"{a.model}-{a.nodes}x{a.rate}"
    elif a.launch:
        prefix = shlex.split(a.launch)
        where = f"launched by `{a.launch}`"
        tag = f"{a.model}-launch"
    else:
        prefix = ["mpirun", "--oversubscribe", "-np", str(ranks)]
        where = f"this host, {ranks} ranks over shared memory"
        tag = f"{a.model}-local-{ranks}ranks"

    if a.ps_server == "dedicated":
        tag += "-dedicated"
    runs = {name: [] for name, _ in ALGOS}
    loads = [load_now()]
    if a.nodes:
        subprocess.run([CLUSTER, f"--name={CLUSTER_NAME}", "up", str(a.nodes),
                        f"--rate={a.rate}"], check=True)
    try:
        for rep in range(a.reps):
            for name, opt in ALGOS:
                cmd = prefix + [os.path.join(a.build, "bin", "oasr-run")] + modules[opt] + [
                    f"--algo={name}"] + common
                if a.ps_server == "dedicated" and not name.startswith("sync"):
                    cmd.append("--ps-server=dedicated")
                load0 = load_now()
                t0 = time.monotonic()
                r = subprocess.run(cmd, capture_output=True, text=True)
                wall = time.monotonic() - t0
                loads.append(load_now())
                if r.returncode:
                    sys.exit(f"run_algorithms: {' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
                out = r.stdout
                curve = evals(out)
                tta, tta_step = time_to(curve, a.target_accuracy)
                it = field(r"mean iteration\s+([0-9.]+) ms", out, "iteration")
                blocked = field(r"exposed comm\s+([0-9.]+) ms", out, "exposed comm")
                runs[name].append({
                    "iteration_ms": it, "blocked_ms": blocked,
                    "comm_share": blocked / it if it > 0 else 0,
                    # The summary's line (the eval lines say "test accuracy" too).
                    "test_accuracy": field(r"(?m)^ +test accuracy\s+([0-9.]+)%", out,
                                           "accuracy") / 100,
                    "time_to_target_s": tta, "time_to_target_step": tta_step,
                    "evals": curve, "wall_s": round(wall, 2), "load": [load0, loads[-1]]})
                shown = {k: v for k, v in runs[name][-1].items() if k != "evals"}
                print(f"round {rep + 1}/{a.reps} {name}: {shown}", flush=True)
    finally:
        if a.nodes:
            subprocess.run([CLUSTER, f"--name={CLUSTER_NAME}", "down"])

    results = summarize(runs)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    doc = {"benchmark": "algorithms-cluster",
           "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores, {cpu}",
           "load": {"min": min(loads), "max": max(loads),
                    "median": statistics.median(loads), "samples": loads},
           "where": where, "nodes": a.nodes, "rate": a.rate if a.nodes else None,
           "ranks": ranks, "model": a.model, "data": data_desc, "steps": a.steps,
           "reps": a.reps, "tau": a.tau, "lr": a.lr, "momentum": a.momentum,
           "eval_every": a.eval_every, "target_accuracy": a.target_accuracy,
           "ps_server": a.ps_server, "model_desc": model_desc, "tag": tag,
           "results": results}
    out_dir = os.path.join(ROOT, "bench", "results")
    base = os.path.join(out_dir, f"algorithms-cluster-{tag}")
    with open(base + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    write_report(doc, base)


def write_report(doc, base):
    """BASE.md from the document that BASE.json holds."""
    results = doc["results"]
    loads = doc["load"]
    target = f"{100 * doc['target_accuracy']:g} %"
    lines = [f"# Training algorithms on {doc['where'].split(':')[0]}: {doc['model']}, "
             f"{doc['ranks']} ranks\n",
             f"{doc['date']}, {doc['machine']}, load (1-min average) {loads['min']:.2f}-"
             f"{loads['max']:.2f}, median {loads['median']:.2f}; `bench/run_algorithms.py "
             f"--model {doc['model']}"
             + (f" --nodes {doc['nodes']} --rate {doc['rate']}" if doc["nodes"] else "")
             + f" --steps {doc['steps']} --reps {doc['reps']} --eval-every {doc['eval_every']} "
             f"--target-accuracy {doc['target_accuracy']:g} --lr {doc['lr']:g} --ps-server "
             f"{doc['ps_server']}`.\n",
             f"* Where: {doc['where']}.",
             f"* Model and data: {doc['model_desc']}; {doc['data']}.",
             f"* {doc['steps']} steps, lr {doc['lr']:g} (the momentum forms: momentum "
             f"{doc['momentum']:g} at lr {doc['lr'] * (1 - doc['momentum']):g}), tau "
             f"{doc['tau']} for the elastic forms, alpha 0.9/P (P: the ranks that train), "
             "parameter server "
             + ("on rank 0, which also trains" if doc["ps_server"] == "shared"
                else "on the last rank, which only serves (the sync forms train on every "
                     "rank)") + ".",
             f"* Median of {doc['reps']} interleaved rounds (range in brackets). *Step*: "
             "oasr-run's mean iteration (rank 0, first step excluded). *Blocked*: the time "
             "per step rank 0's compute thread waited on communication (allreduces or "
             "exchanges); *comm share* = blocked / step. *Time to* the target: the training "
             "wall time (evaluations excluded) at the first evaluation (every "
             f"{doc['eval_every']} steps) at or above it, median over the rounds that reached "
             "it (*reached*: of how many). *Final*: the test accuracy of the final weights.\n",
             f"| algorithm | optimizer | step (ms) | blocked (ms) | comm share | "
             f"time to {target} (s) | reached | final test accuracy | run wall (s) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lo, hi = r["iteration_range_ms"]
        slo, shi = r["comm_share_range"]
        alo, ahi = r["accuracy_range"]
        if r["time_to_target_s"] is None:
            tt = "-"
        else:
            tlo, thi = r["time_to_target_range_s"]
            tt = f"{r['time_to_target_s']:.1f} [{tlo:.1f}-{thi:.1f}]"
        lines.append(f"| {r['algorithm']} | {r['optimizer']} | {r['iteration_ms']:.1f} "
                     f"[{lo:.1f}-{hi:.1f}] | {r['blocked_ms']:.1f} | "
                     f"{100 * r['comm_share']:.0f} % [{100 * slo:.0f}-{100 * shi:.0f}] | {tt} | "
                     f"{r['reached']}/{len(r['runs'])} | {100 * r['test_accuracy']:.1f} % "
                     f"[{100 * alo:.1f}-{100 * ahi:.1f}] | {r['wall_s']:.1f} |")
    lines += ["", "Test accuracy at each evaluation (step: accuracy in %, median over the "
              "rounds):", ""]
    for r in results:
        steps = sorted({e[0] for x in r["runs"] for e in x["evals"]})
        pts = []
        for st in steps:
            accs = [e[2] for x in r["runs"] for e in x["evals"] if e[0] == st]
            pts.append(f"{st}: {100 * statistics.median(accs):.0f}")
        lines.append(f"* {r['algorithm']}: " + ", ".join(pts))
    if doc.get("notes"):
        lines += ["", doc["notes"].strip()]
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

if __name__ == "__main__":
    main()
