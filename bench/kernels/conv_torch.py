#!/usr/bin/env python3
# ===- conv_torch.py - PyTorch CPU convolutions on the same shapes ---------===#
# The reference for oasr-bench-kernels: forward and backward (input, weight
# and bias gradients) of torch.nn.functional.conv2d on ResNet-50 shapes.
# Usage: conv_torch.py [--batch N] [--threads T] [--min-time S] [--clock wall|cpu]
import argparse
import time

import torch
import torch.nn.functional as F

LAYERS = [
    ("conv1_7x7s2", 3, 224, 64, 7, 2, 3),
    ("l1_1x1_64", 64, 56, 64, 1, 1, 0),
    ("l1_3x3_64", 64, 56, 64, 3, 1, 1),
    ("l1_1x1_256", 64, 56, 256, 1, 1, 0),
    ("l2_3x3s2_128", 128, 56, 128, 3, 2, 1),
    ("l3_3x3_256", 256, 14, 256, 3, 1, 1),
    ("l4_3x3_512", 512, 7, 512, 3, 1, 1),
    ("l4_1x1_2048", 512, 7, 2048, 1, 1, 0),
]


CLOCK = time.perf_counter


def time_it(f, min_time):
    f()
    f()
    iters, start = 0, CLOCK()
    while iters < 3 or CLOCK() - start < min_time:
        f()
        iters += 1
    return (CLOCK() - start) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    a = ap.parse_args()
    global CLOCK
    if a.clock == "cpu":
        CLOCK = time.process_time
    if a.threads:
        torch.set_num_threads(a.threads)
    print(f"# torch {torch.__version__}, batch {a.batch}, threads {torch.get_num_threads()}, mkldnn {torch.backends.mkldnn.is_available()}, {a.clock} time")
    print(f"{'layer':<14} {'fwd_ms':>9} {'bwd_ms':>9} {'fwd_GF/s':>9} {'bwd_GF/s':>9}")
    for name, c, hw, m, k, s, p in LAYERS:
        x = torch.randn(a.batch, c, hw, hw, requires_grad=True)
        w = torch.randn(m, c, k, k, requires_grad=True)
        b = torch.randn(m, requires_grad=True)
        with torch.no_grad():
            y = F.conv2d(x, w, b, s, p)
        dy = torch.randn_like(y)

        def fwd():
            with torch.no_grad():
                F.conv2d(x, w, b, s, p)

        yg = F.conv2d(x, w, b, s, p)

        def bwd():
            torch.autograd.grad(yg, (x, w, b), dy, retain_graph=True)

        tf, tb = time_it(fwd, a.min_time), time_it(bwd, a.min_time)
        o = y.shape[-1]
        flops = 2.0 * a.batch * m * o * o * c * k * k
        print(f"{name:<14} {tf*1e3:9.3f} {tb*1e3:9.3f} {flops/tf*1e-9:9.1f} {2*flops/tb*1e-9:9.1f}")


if __name__ == "__main__":
    main()
