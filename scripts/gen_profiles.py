#!/usr/bin/python3
"""Generate oasr-profile-v1 files from real torchvision models.

Measures, with PyTorch hooks, when each parameter's gradient becomes ready
during loss.backward(), and derives per-layer backward times from those
ready times (DESIGN.md, "Profile file"). A "layer" is a module that owns
parameters directly (Conv, BatchNorm, Linear, ...); parameter-free modules
(ReLU, pooling) fold into the time of the next layer backward reaches.

  /usr/bin/python3 scripts/gen_profiles.py --models resnet50,vgg16 \
      --batch 8 --iters 3 --out examples/profiles

Per iteration: forward (+ loss) time, backward with a timestamp per
gradient hook, and an SGD-with-momentum step (update_us). Each number is the
median over --iters measured iterations after one warm-up. Layers are listed
in the reverse of their measured gradient-ready order, i.e. forward order for
the model's backward schedule. The profile carries the 8-worker 56 Gb IB
alpha/beta of MG-WFBP as its default "comm" (override it in oasr-plan).

Runs on CPU by default (--device cuda synchronizes inside every hook, which
perturbs the numbers slightly but makes them meaningful on a GPU).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import time

import torch
import torchvision


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def measure(name, batch, iters, device, image):
    model = getattr(torchvision.models, name)(weights=None).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sync = (lambda: torch.cuda.synchronize()) if device == "cuda" else (lambda: None)

    # Layers: modules with their own parameters, in first-forward order.
    owners = {}  # param name -> layer name
    layers = {}  # layer name -> list of (param name, bytes, rows)
    for mname, mod in model.named_modules():
        own = list(mod.named_parameters(recurse=False))
        if not own:
            continue
        layers[mname] = []
        for pname, p in own:
            full = f"{mname}.{pname}" if mname else pname
            owners[full] = mname
            # rows: the first dimension of a matrix (PowerSGD's n), else 0.
            layers[mname].append((full, p.numel() * p.element_size(),
                                  p.shape[0] if p.dim() >= 2 else 0))

    ready = {}
    clock = {"t0": 0.0}

    def make_hook(pname):
        def hook(grad):
            sync()
            ready[pname] = (time.perf_counter() - clock["t0"]) * 1e6
        return hook

    for pname, p in model.named_parameters():
        p.register_hook(make_hook(pname))

    x = torch.randn(batch, 3, image, image, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    samples = []
    for it in range(iters + 1):
        opt.zero_grad(set_to_none=True)
        ready.clear()
        sync()
        t = time.perf_counter()
        out = model(x)
        if isinstance(out, tuple):  # inception/googlenet aux outputs
            out = out[0]
        loss = loss_fn(out, y)
        sync()
        t_fwd = (time.perf_counter() - t) * 1e6
        clock["t0"] = time.perf_counter()
        loss.backward()
        sync()
        t_bwd = (time.perf_counter() - clock["t0"]) * 1e6
        t = time.perf_counter()
        opt.step()
        sync()
        t_upd = (time.perf_counter() - t) * 1e6
        if it > 0:  # the first iteration warms up
            samples.append((t_fwd, t_bwd, t_upd, dict(ready)))

    med = statistics.median
    forward_us = med(s[0] for s in samples)
    backward_total = med(s[1] for s in samples)
    update_us = med(s[2] for s in samples)
    # A layer is ready when its last parameter's gradient is.
    layer_ready = {}
    for lname, params in layers.items():
        layer_ready[lname] = med(max(s[3][p] for p, _, _ in params) for s in samples)
    backward_order = sorted(layers, key=lambda l: layer_ready[l])
    out_layers = []
    prev = 0.0
    for lname in backward_order:
        out_layers.append({
            "name": lname,
            "backward_us": round(max(0.0, layer_ready[lname] - prev), 3),
            "grads": [dict({"name": p, "bytes": b}, **({"rows": r} if r else {}))
                      for p, b, r in layers[lname]],
        })
        prev = layer_ready[lname]
    out_layers.reverse()  # forward order
    where = (torch.cuda.get_device_name() if device == "cuda"
             else f"{cpu_name()}, {torch.get_num_threads()} thread(s)")
    return {
        "format": "oasr-profile-v1",
        "model": name,
        "batch": batch,
        "source": (f"scripts/gen_profiles.py: PyTorch {torch.__version__} "
                   f"gradient hooks on {where}, {image}x{image} input, median "
                   f"of {iters} iterations; measured backward total "
                   f"{backward_total:.1f} us"),
        "forward_us": round(forward_us, 3),
        "update_us": round(update_us, 3),
        "layers": out_layers,
        "comm": {"alpha_s": 9.75e-5, "beta_s_per_byte": 3.06e-10, "ranks": 8},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,resnet50,vgg16,mobilenet_v2,densenet121")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__),
                                                  "..", "examples", "profiles"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    for name in args.models.split(","):
        t = time.time()
        prof = measure(name, args.batch, args.iters, args.device, args.image)
        path = os.path.join(args.out, f"{name}.json")
        with open(path, "w") as f:
            json.dump(prof, f, indent=1)
            f.write("\n")
        n = sum(len(l["grads"]) for l in prof["layers"])
        print(f"{path}: {len(prof['layers'])} layers, {n} tensors, "
              f"forward {prof['forward_us'] / 1e3:.1f} ms, "
              f"backward {sum(l['backward_us'] for l in prof['layers']) / 1e3:.1f} ms "
              f"({time.time() - t:.0f} s)")


if __name__ == "__main__":
    main()
