#!/usr/bin/env python3
"""A PyTorch DDP job (gloo) that trains until told to stop, for the fault
runs of bench/run_faults.py: what a link cut does to DDP.

    RANK=r WORLD_SIZE=w ddp_fault.py --master ADDR [--timeout S] [--steps N]

A small MLP (the same shape as oasr's test MLP), batch 8 a rank, one compute
thread. Each rank prints `ddp: rank R step N` every 500 steps and, when a
collective fails, `ddp: rank R: error after T s without progress: MESSAGE`
with the time since its last completed step; then it exits 1. --timeout sets
init_process_group's timeout (default: PyTorch's own, 30 minutes for gloo).
"""
import argparse
import sys
import time

import ddp_launch


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ddp_launch.add_rendezvous_args(p)
    p.add_argument("--timeout", type=float, default=None,
                   help="the process group's timeout in seconds")
    p.add_argument("--steps", type=int, default=10**9)
    a = p.parse_args()
    rank, world = ddp_launch.rank_and_world("ddp_fault", a)
    import torch
    import torch.distributed as dist
    ddp_launch.init_gloo(a, rank, world, a.timeout)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    last = time.monotonic()
    for step in range(1, a.steps + 1):
        try:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        except Exception as e:  # gloo's timeout or a closed connection
            first = str(e).strip().splitlines()[0][:300]
            print(f"ddp: rank {rank}: error after {time.monotonic() - last:.1f} s "
                  f"without progress: {first}", flush=True)
            sys.exit(1)
        last = time.monotonic()
        if step % 500 == 0:
            print(f"ddp: rank {rank} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
