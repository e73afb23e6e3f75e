#!/usr/bin/python3
"""Exports the small seeded PyTorch models some runtime tests train.

    export_model.py {cifar-cnn,wide,digits-cnn} OUT.onnx [--hidden H] [--seed 0]

cifar-cnn: 3x32x32 input (CIFAR-10 records): conv -> BN -> relu -> maxpool
    -> conv -> relu -> avgpool -> flatten -> gemm.
wide: 3x8x8 input: conv -> BN -> relu -> maxpool -> flatten -> gemm (128 ->
    H, by default 2560: 1.25 MiB of weights) -> relu -> gemm, so that
    byte-based plans (PyTorch DDP's 1 MiB first bucket) really split the
    gradients, and a large H makes an allreduce outlast the rest of backward.
    `--dropout P` adds dropout (training mode) after fc1's relu.

digits-cnn: 1x8x8 input (scikit-learn's digits as IDX): conv -> BN -> relu
    -> flatten -> gemm (512 -> 64) -> relu -> gemm.

Exported like scripts/torch_reference.py does (training mode, no constant
folding, symbolic batch).
"""
import argparse

import torch

p = argparse.ArgumentParser()
p.add_argument("model", choices=["cifar-cnn", "wide", "digits-cnn"])
p.add_argument("out")
p.add_argument("--hidden", type=int, default=2560)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--dropout", type=float, default=0.0)
a = p.parse_args()
torch.manual_seed(a.seed)
F = torch.nn.functional


class CifarCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)  # 16x16
        x = F.avg_pool2d(F.relu(self.conv2(x)), 4)  # 4x4
        return self.fc(torch.flatten(x, 1))


class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc1 = torch.nn.Linear(8 * 4 * 4, a.hidden)
        self.fc2 = torch.nn.Linear(a.hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        if a.dropout > 0:
            x = F.dropout(x, a.dropout, training=True)
        return self.fc2(x)


class DigitsCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc1 = torch.nn.Linear(8 * 8 * 8, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


model, shape = {"cifar-cnn": (CifarCNN, (3, 32, 32)),
                "wide": (Wide, (3, 8, 8)),
                "digits-cnn": (DigitsCNN, (1, 8, 8))}[a.model]
model = model()
model.train()
torch.onnx.export(model, torch.randn(2, *shape), a.out,
                  training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, opset_version=17,
                  input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}})
print(f"wrote {a.out}")
