"""Models for export-route-dynamo.test, as FILE.py:FUNCTION for
python3 -m oasr.export."""
import torch
from torch import nn


def group_norm():
    """Conv, GroupNorm, SiLU and a classifier: the dynamo exporter writes
    GroupNorm as InstanceNormalization over [N, groups, rest] and an affine."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8),
                         nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 10))
