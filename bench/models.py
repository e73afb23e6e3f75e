#!/usr/bin/env python3
"""PyTorch side of the model-family benchmark (bench/run_models.sh).

    models.py MODEL --batch 32 --threads 2 --steps 10

Builds MODEL exactly as scripts/model_zoo.py does (same seed, same weights
as the exported ONNX file), trains it with SGD on one fixed batch (forward,
cross-entropy, backward, update) and prints one JSON line: the median and
the range of the step times after the first (s), and torch's version and
BLAS. Runs under any PyTorch: Debian's python3-torch 1.13 (generic BLAS) or
PyPI's torch 2.x (MKL + oneDNN) in a virtual environment.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()
    import torch
    import torch.nn.functional as F
    import model_zoo

    torch.set_num_threads(a.threads)
    model = model_zoo.build(a.model, 0)
    model.train()
    x, y = model_zoo.make_batch(a.model, a.batch, 1)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        if logits.dim() == 3:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        else:
            loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    steady = times[1:]
    blas = "mkl" if torch.backends.mkl.is_available() else "generic"
    print(json.dumps({"model": a.model, "torch": torch.__version__, "blas": blas,
                      "median_s": statistics.median(steady),
                      "min_s": min(steady), "max_s": max(steady)}))


if __name__ == "__main__":
    main()
