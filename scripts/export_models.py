#!/usr/bin/env python3
"""Exports the real models of the importer's integration test and benchmark
to ONNX in PyTorch's training mode, with a manifest of their trainable
parameters (what the imported oasr.param arguments must match).

Run with Debian's interpreter (python3-torch / python3-torchvision):
    /usr/bin/python3 scripts/export_models.py OUT_DIR [--models a,b] [--batch N]
                                                      [--opset 13..17]

Writes OUT_DIR/<model>.onnx and OUT_DIR/<model>.json:
    {"model": ..., "params": N, "numel": M, "bytes": B, "names": [...],
     "onnx_bytes": file size, "export_s": seconds}
An existing .onnx with a matching .json is kept (models are exported once).
"""

import argparse
import json
import os
import sys
import time

MODELS = ["resnet18", "resnet50", "vgg16", "alexnet", "googlenet",
          "inception_v3", "densenet121", "mobilenet_v2", "transformer", "cifar_cnn"]
# Exported only when named (--models): 435 MB, for bench/run_cluster.sh.
EXTRA_MODELS = ["bert_base"]


def build(name):
    import torch
    import torchvision

    if name == "transformer":
        class Encoder(torch.nn.Module):
            def __init__(self, vocab=1000, d=128, heads=4, layers=2, classes=10):
                super().__init__()
                self.embed = torch.nn.Embedding(vocab, d)
                layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d,
                                                         dropout=0.1, batch_first=True)
                self.encoder = torch.nn.TransformerEncoder(layer, layers)
                self.head = torch.nn.Linear(d, classes)

            def forward(self, tokens):
                h = self.encoder(self.embed(tokens))
                return self.head(h.mean(dim=1))

        return Encoder(), torch.randint(0, 1000, (2, 16))
    if name == "bert_base":
        # bench/precision.py's BERT-base (12 layers, 768 wide, sequence 128).
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), "bench"))
        from precision import BertBase
        return BertBase(), torch.randint(1, 30522, (2, 128))
    if name == "cifar_cnn":
        # bench/run_algorithms.py --model cnn: 3x32x32 in, 10 classes, no BN;
        # two small convolutions and a wide fully connected layer, so the
        # 0.55 M parameters (2.2 MB of gradients) cost little compute.
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(64 * 8 * 8, 128), torch.nn.ReLU(),
            torch.nn.Linear(128, 10)), torch.randn(1, 3, 32, 32)
    kwargs = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs["aux_logits"] = False
        kwargs["init_weights"] = False
    model = getattr(torchvision.models, name)(**kwargs)
    size = 299 if name == "inception_v3" else 224
    return model, torch.randn(1, 3, size, size)


def export(name, out_dir, opset):
    import torch

    torch.manual_seed(0)
    model, example = build(name)
    model.train()
    path = os.path.join(out_dir, name + ".onnx")
    start = time.time()
    torch.onnx.export(model, example, path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=opset,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}})
    elapsed = time.time() - start
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    manifest = {
        "model": name,
        "opset": opset,
        "params": len(params),
        "numel": int(sum(p.numel() for _, p in params)),
        "bytes": int(sum(p.numel() * p.element_size() for _, p in params)),
        "names": [n for n, _ in params],
        "onnx_bytes": os.path.getsize(path),
        "export_s": round(elapsed, 2),
    }
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--opset", type=int, default=14)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.models.split(","):
        onnx_path = os.path.join(args.out_dir, name + ".onnx")
        json_path = os.path.join(args.out_dir, name + ".json")
        if not args.force and os.path.exists(onnx_path) and os.path.exists(json_path):
            with open(json_path) as f:
                if json.load(f).get("opset") == args.opset:
                    print(f"{name}: cached", file=sys.stderr)
                    continue
        m = export(name, args.out_dir, args.opset)
        print(f"{name}: {m['params']} params, {m['numel']} elements, "
              f"{m['onnx_bytes'] / 1e6:.1f} MB, exported in {m['export_s']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
