#!/usr/bin/env python3
# PyTorch's op on each shape of bench/kernels/OpsBench.cpp (oasr-bench-ops),
# same output format: name  ms  elements.
# Usage: ops_torch.py [--threads T] [--min-time S] [--clock wall|cpu]
import argparse
import time

import torch
import torch.nn.functional as F


def time_it(f, min_time, clock):
    f()
    f()
    n, start = 0, clock()
    now = start
    while n < 3 or now - start < min_time:
        f()
        n += 1
        now = clock()
    return (now - start) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    torch.manual_seed(0)
    act = torch.rand(8, 64, 56, 56) * 4 - 2
    emb = torch.rand(8, 256, 512) * 4 - 2
    red = torch.rand(64, 1024, 64) * 4 - 2
    logits = torch.rand(256, 32000)
    data = torch.rand(8, 1024, 64)
    idx = torch.randint(0, 1024, (8, 512, 64))
    upd = torch.rand(8, 512, 64)
    nd = torch.randint(0, 1024, (8, 256))
    ids = torch.randint(0, 1000, (4096,))
    slope = torch.rand(64, 1, 1)
    other = torch.rand_like(act)
    wide = torch.rand(8, 1024, 256)
    cases = [
        ("Sin", lambda: torch.sin(emb), emb.numel()),
        ("Cos", lambda: torch.cos(emb), emb.numel()),
        ("Softplus", lambda: F.softplus(act), act.numel()),
        ("Softsign", lambda: F.softsign(act), act.numel()),
        ("Selu", lambda: F.selu(act), act.numel()),
        ("Celu", lambda: F.celu(act), act.numel()),
        ("Floor", lambda: torch.floor(act), act.numel()),
        ("PRelu", lambda: torch.where(act > 0, act, act * slope), act.numel()),
        ("Max", lambda: torch.maximum(act, other), act.numel()),
        ("Mod_fmod", lambda: torch.fmod(act, 0.7), act.numel()),
        ("ReduceMax", lambda: torch.amax(red, -1, keepdim=True), 65536),
        ("ReduceProd", lambda: torch.prod(red, -1, keepdim=True), 65536),
        ("CumSum", lambda: torch.cumsum(wide, 1), wide.numel()),
        ("ArgMax", lambda: torch.argmax(logits, -1, keepdim=True), 256),
        ("TopK_k5", lambda: torch.topk(logits, 5, -1), 1280),
        ("GatherElements", lambda: torch.gather(data, 1, idx), idx.numel()),
        ("ScatterElements_add", lambda: data.scatter_add(1, idx, upd), data.numel()),
        ("GatherND_batch", lambda: data[torch.arange(8)[:, None], nd], 131072),
        ("OneHot", lambda: F.one_hot(ids, 1000).float(), 4096000),
    ]
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, {a.clock} time")
    print(f"{'op':<20} {'ms':>10} {'elements':>12}")
    for name, f, n in cases:
        print(f"{name:<20} {time_it(f, a.min_time, clock) * 1e3:10.3f} {n:12d}")


if __name__ == "__main__":
    main()
