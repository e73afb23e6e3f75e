"""Which of a model's gradients PowerSGD's rank costs accuracy on.

A single-process emulation of data-parallel training on RANKS ranks with
oasr's PowerSGD (runtime/comm/PowerSGD.cpp: per matrix, M = G + E on each
rank, P = mean(M Q), P orthonormalised by Gram-Schmidt, Q = mean(M^T P),
the update P Q^T, E = M - P Q^T; Q kept across steps; vectors and
matrices whose factors would not halve the bytes sent as they are), with a
rank chosen per parameter, so a rank's cost to accuracy can be traced to
the gradients it approximates. No communication is timed: it answers what
a step learns, not how fast.

  psgd_probe.py [--model bert] [--steps 500] [--seeds 1,2,3]
                --config NAME=SPEC [--config ...] --out FILE_STEM

SPEC: "off" (every gradient averaged exactly), or "rR" (PowerSGD at rank
R) followed by ",PARAM=plain|rR" overrides for parameters whose name
contains PARAM (e.g. "r8,tok.weight=plain"). The model and data are
bench/token_model.py's (the data generated as bench/run_compress.py
generates it, batch 32 a rank, momentum SGD 0.9 at lr 0.05, PowerSGD after
10 uncompressed steps, as that benchmark trains). Accuracy: the training
batches' over the last 25 steps, each before its update (no sequence
repeats). Writes FILE_STEM.json and FILE_STEM.md (refusing to overwrite):
per config and seed the final accuracy and loss, and each config's
difference from "off" seed by seed (the seeds share data order and
initial weights, so the differences pair).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import token_model  # noqa: E402


def compresses(rows, numel, rank):
    """schedule::powerSgdCompresses: r (n + m) 2 < n m."""
    if rows < 2 or rank == 0 or numel % rows:
        return False
    cols = numel // rows
    return cols >= 2 and 2.0 * rank * (rows + cols) < rows * cols


def parse_spec(spec):
    parts = spec.split(",")
    if parts[0] == "off":
        return 0, {}
    if not parts[0].startswith("r"):
        raise SystemExit(f"psgd_probe.py: error: config '{spec}': expected off or rR")
    base = int(parts[0][1:])
    over = {}
    for p in parts[1:]:
        name, _, form = p.partition("=")
        if form != "plain" and not form.startswith("r"):
            raise SystemExit(f"psgd_probe.py: error: config '{spec}': '{p}': "
                             "expected PARAM=plain or PARAM=rR")
        over[name] = 0 if form == "plain" else int(form[1:])
    return base, over


def orthogonalize(p):
    """Gram-Schmidt on P's columns, in order (as oasr's loop)."""
    for k in range(p.shape[1]):
        col = p[:, k]
        for j in range(k):
            col -= torch.dot(col, p[:, j]) * p[:, j]
        n = torch.linalg.vector_norm(col)
        p[:, k] = col / n if n > 0 else col


class PowerSgd:
    def __init__(self, params, base, over, ranks, seed):
        self.state = {}
        for name, p in params:
            rank = base
            for key, r in over.items():
                if key in name:
                    rank = r
            rows = p.shape[0] if p.dim() >= 2 else 0
            if rank and compresses(rows, p.numel(), rank):
                cols = p.numel() // rows
                g = torch.Generator().manual_seed(zlib.crc32(f"{name}/{seed}".encode()))
                self.state[name] = dict(rank=rank, q=torch.randn(cols, rank, generator=g),
                                        e=[torch.zeros(rows, cols) for _ in range(ranks)])

    def average(self, name, grads):
        """The averaged gradient of parameter `name` from each rank's."""
        s = self.state.get(name)
        if s is None:
            return sum(grads) / len(grads)
        shape = grads[0].shape
        m = [g.reshape(shape[0], -1) + e for g, e in zip(grads, s["e"])]
        p = sum(mi @ s["q"] for mi in m) / len(m)
        orthogonalize(p)
        q = sum(mi.t() @ p for mi in m) / len(m)
        approx = p @ q.t()
        s["e"] = [mi - approx for mi in m]
        s["q"] = q
        return approx.reshape(shape)


def train(cfg, ids, labels, seed, spec, steps, ranks, batch, start, window):
    torch.manual_seed(0)
    model = token_model.make_model(**cfg)
    params = list(model.named_parameters())
    base, over = parse_spec(spec)
    psgd = PowerSgd(params, base, over, ranks, seed)
    velocity = [torch.zeros_like(p) for _, p in params]
    order = np.random.RandomState(seed).permutation(len(ids))
    hits = seen = 0
    losses = []
    for step in range(steps):
        per_rank = []
        for r in range(ranks):
            at = (step * ranks + r) * batch
            idx = order[at:at + batch]
            x = torch.from_numpy(ids[idx])
            y = torch.from_numpy(labels[idx])
            model.zero_grad()
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            per_rank.append([p.grad.detach().clone() for _, p in params])
            if step >= steps - window:
                hits += int((out.argmax(1) == y).sum())
                seen += len(y)
                losses.append(loss.item())
        with torch.no_grad():
            for k, (name, p) in enumerate(params):
                grads = [g[k] for g in per_rank]
                avg = (psgd.average(name, grads) if step >= start
                       else sum(grads) / ranks)
                velocity[k].mul_(0.9).add_(avg)
                p.sub_(0.05 * velocity[k])
    compressed = sorted(f"{n} ({s['rank']})" for n, s in psgd.state.items())
    return hits / seen, statistics.mean(losses), compressed


def main():
    a = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--model", default="bert", choices=sorted(token_model.MODELS))
    a.add_argument("--steps", type=int, default=500)
    a.add_argument("--seeds", default="1,2,3")
    a.add_argument("--ranks", type=int, default=2)
    a.add_argument("--batch", type=int, default=32)
    a.add_argument("--compress-start", type=int, default=10)
    a.add_argument("--threads", type=int, default=2)
    a.add_argument("--config", action="append", required=True, metavar="NAME=SPEC")
    a.add_argument("--out", required=True, metavar="FILE_STEM")
    o = a.parse_args()
    for ext in (".json", ".md"):
        if os.path.exists(o.out + ext):
            raise SystemExit(f"psgd_probe.py: error: {o.out}{ext} exists; results are "
                             "never overwritten")
    configs = []
    for c in o.config:
        name, _, spec = c.partition("=")
        if not spec:
            raise SystemExit(f"psgd_probe.py: error: --config {c}: expected NAME=SPEC")
        parse_spec(spec)
        configs.append((name, spec))
    torch.set_num_threads(o.threads)
    cfg = token_model.MODELS[o.model]
    seeds = [int(s) for s in o.seeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokens")
        count = o.steps * o.batch * o.ranks
        token_model.generate(path, sequences=count, **cfg, **token_model.DATA[o.model])
        ids, labels = token_model.read(path, cfg["seq"])
    load_before = os.getloadavg()[0]
    runs = []
    for seed in seeds:  # configs interleaved within each seed
        for name, spec in configs:
            acc, loss, comp = train(cfg, ids, labels, seed, spec, o.steps, o.ranks,
                                    o.batch, o.compress_start, 25)
            runs.append(dict(config=name, spec=spec, seed=seed, final_accuracy=acc,
                             final_loss=loss, compressed=comp,
                             load=os.getloadavg()[0]))
            print(f"seed {seed} {name}: {100 * acc:.1f} % loss {loss:.4f}", flush=True)
    doc = dict(benchmark="psgd_probe", model=o.model, steps=o.steps, ranks=o.ranks,
               batch=o.batch, compress_start=o.compress_start, seeds=seeds,
               date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
               machine=f"{platform.machine()}, {os.cpu_count()} cores",
               torch=torch.__version__, load_before=load_before,
               load_after=os.getloadavg()[0], runs=runs)
    with open(o.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    by = {(r["config"], r["seed"]): r for r in runs}
    lines = [f"# PowerSGD's rank and accuracy per gradient: {o.model}, emulated "
             f"{o.ranks} ranks", "",
             f"{doc['date']}; {doc['machine']}; torch {doc['torch']}; load average "
             f"(1 min) {load_before:.2f} before, {doc['load_after']:.2f} after. "
             f"`bench/psgd_probe.py` (single process: each rank's gradient from its "
             f"own batch of {o.batch}, oasr's PowerSGD per matrix, no "
             f"communication), {o.steps} steps, PowerSGD from step "
             f"{o.compress_start}, seeds {o.seeds} (data order; the same initial "
             f"weights). Final accuracy: the training batches' over the last 25 "
             f"steps, each before its update.", "",
             "| config | spec | " + " | ".join(f"seed {s}" for s in seeds) +
             " | median | vs off, seed by seed (points) |",
             "|---|---|" + "---|" * len(seeds) + "---|---|"]
    for name, spec in configs:
        accs = [100 * by[(name, s)]["final_accuracy"] for s in seeds]
        diff = "-"
        if any(c == "off" for c, _ in configs):
            off = next(c for c, sp in configs if sp == "off")
            diff = ", ".join(f"{100 * (by[(name, s)]['final_accuracy'] - by[(off, s)]['final_accuracy']):+.1f}"
                             for s in seeds)
        lines.append(f"| {name} | `{spec}` | " + " | ".join(f"{x:.1f} %" for x in accs) +
                     f" | {statistics.median(accs):.1f} % | {diff} |")
    lines += ["", "Compressed parameters (rank) per config:", ""]
    for name, _ in configs:
        lines.append(f"* {name}: {', '.join(by[(name, seeds[0])]['compressed']) or 'none'}")
    with open(o.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
