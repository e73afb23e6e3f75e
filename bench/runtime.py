#!/usr/bin/python3
"""PyTorch CPU reference for the runtime benchmarks (bench/run_runtime*.sh).

    runtime.py MODEL --batch 16 --threads 2 --steps 5
    runtime.py mlp-wide --export OUT.onnx

`mlp-wide` (784 -> 4 x 2048 -> 10, 14.3 M parameters in 10 tensors) is the
multi-rank benchmark's model: enough gradient bytes for the allreduces to
matter next to the compute on a small machine.

Builds the model exactly as scripts/export_models.py does (torchvision, no
pretrained weights, seed 0), trains it with SGD on random data (forward,
cross-entropy, backward, update) and prints one JSON line: mean step time
over the steps after the first (s) and the peak RSS of the process (bytes).
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--export", default="")
    a = p.parse_args()
    import torch
    from export_models import build as build_vision

    def build(name):
        if name == "mlp-wide":
            layers, width = [], 784
            for _ in range(4):
                layers += [torch.nn.Linear(width, 2048), torch.nn.ReLU()]
                width = 2048
            layers.append(torch.nn.Linear(width, 10))
            return torch.nn.Sequential(*layers), torch.randn(1, 784)
        return build_vision(name)

    if a.export:
        torch.manual_seed(0)
        model, example = build(a.model)
        model.train()
        torch.onnx.export(model, example, a.export, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=17,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}})
        return

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model, example = build(a.model)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn((a.batch,) + tuple(example.shape[1:]))
    y = torch.randint(0, 1000, (a.batch,))
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    measured = times[1:] if len(times) > 1 else times
    print(json.dumps({
        "framework": "pytorch " + torch.__version__,
        "model": a.model, "batch": a.batch, "threads": a.threads, "steps": a.steps,
        "step_s": sum(measured) / len(measured),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    main()
