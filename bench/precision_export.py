#!/usr/bin/python3
"""Export helper of the precision benchmark (bench/run_precision.py).

    /usr/bin/python3 bench/precision_export.py MODEL DIR [--batch 8]

Writes what oasr-run needs to train MODEL (one of bench/precision.py's) on
the batch bench/precision.py trains PyTorch on:
  DIR/MODEL-bB.onnx   the model (seed 0) exported in training mode the way
                      bench/run_large_models.sh exports ViT-B/16 and BERT:
                      TorchScript exporter (dynamo=False where torch has
                      it), TrainingMode.TRAINING, no constant folding,
                      opset 17, input "input" ("ids" for bert_base, as
                      there), output "logits", batch B fixed
  DIR/MODEL-bB-data/  the fixed batch: images as MNIST-layout IDX files
                      (float32 images, byte labels: --data=mnist:DIR), token
                      ids as a flat u16 file with int64 labels beside it
                      (tokens.bin, tokens.bin.labels: --data=tokens:FILE),
                      as scripts/model_zoo.py's `batch` writes them
and prints one JSON line {"onnx": PATH, "data": SPEC}. Runs under Debian's
python3-torch 1.13 (what bench/run_large_models.sh uses) or a torch 2.x.
"""
import argparse
import json
import os
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(os.path.dirname(BENCH), "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(BENCH), "python"))

import torch  # noqa: E402

import precision  # noqa: E402
from oasr import data  # noqa: E402
from oasr._export import exporter_args  # noqa: E402


def write_data(name, batch, d):
    """The fixed batch under d; returns oasr-run's --data argument."""
    x, y = precision.make_batch(name, batch)
    if precision.MODELS[name][0] == "image":
        return data.write_images(d, x, y)
    return data.write_tokens(os.path.join(d, "tokens.bin"), x, y)


def export(name, batch, path):
    model = precision.build(name)
    if precision.MODELS[name][0] == "image":
        dummy, inputs = torch.randn(batch, *precision.IMAGE), ["input"]
    else:
        dummy = torch.randint(1, precision.VOCAB, (batch, precision.SEQ))
        inputs = ["ids"]
    torch.onnx.export(model, dummy, path,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17,
                      input_names=inputs, output_names=["logits"],
                      **exporter_args(torch))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", choices=sorted(precision.MODELS))
    p.add_argument("dir")
    p.add_argument("--batch", type=int, default=8)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    stem = os.path.join(os.path.abspath(a.dir), f"{a.model}-b{a.batch}")
    export(a.model, a.batch, stem + ".onnx")
    data = write_data(a.model, a.batch, stem + "-data")
    print(json.dumps({"onnx": stem + ".onnx", "data": data,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
