#!/usr/bin/python3
"""Model families users bring, and PyTorch float64 references for their
first-step gradients.

Run with Debian's interpreter (python3-torch 1.13, python3-onnx,
python3-torchvision):

  model_zoo.py list
  model_zoo.py export NAME OUT.onnx [--batch N] [--seed S]
      Builds the small model with seeded weights and exports it to ONNX in
      training mode (no constant folding), as a user would.
  model_zoo.py batch NAME DIR [--batch N] [--seed S]
      Writes one batch for `oasr-run --data=...`: float images/sequences as
      MNIST-layout IDX files (DIR/train-*), token ids as a flat u16 file
      (DIR/tokens.bin). Prints the --data argument to use.
  model_zoo.py check NAME DUMP --data DIR [--seed S]
      Recomputes the loss and every parameter gradient of that batch with
      PyTorch in float64 on the weights oasr-run used (read from the dump),
      and once more in float32, and compares oasr's gradients with the
      float64 reference per parameter, normwise:
          err = ||g - g64|| / ||g64||
      A parameter passes when err <= max(1e-4, 2 * err(float32 torch)):
      deep normalised networks at small inputs are ill-conditioned, so
      PyTorch's own float32 result bounds what float32 can reach. err(float32
      torch) is the worst of PyTorch's float32 run and JITTER runs on weights
      perturbed at a K-term sum's rounding noise (1 + u * 2^-24 * sqrt(K),
      K the model's longest reduction), so a ReLU kink within float32's
      noise counts against float32, not against luck, and
      of OTHER_ISA_RUNS runs under the other oneDNN ISA (a child process
      with ONEDNN_MAX_CPU_ISA=AVX2 when this one is not capped, uncapped
      when it is): oneDNN picks other kernels, with other summation orders,
      on other CPUs, and oasr's error there is bounded by float32's error
      there, so the envelope holds on AVX2 and AVX-512 machines alike (f32;
      PyTorch's bf16 convolutions do not run under the cap).
      Exits 1 on any failure.
  model_zoo.py check NAME DUMP --data DIR --precision bf16
      The same for a run with --precision=bf16, against PyTorch's own mixed
      precision: the bound is max(2^-8, 2 * err(PyTorch autocast)), where
      err(PyTorch autocast) is the worst of torch.autocast("cpu", bfloat16)
      on the dumped weights and JITTER runs on weights perturbed at bf16's
      rounding level (1 + u * 2^-9), and 2^-8 is one bf16 rounding step.
      The loss passes within the same bound.

The gradient dump is oasr-run's --dump-grads output (.json or .npz).
"""
import argparse
import math
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import torchscript_exporter  # noqa: E402
from oasr.data import write_idx  # noqa: E402  (torch_reference's path)
import torch.nn.functional as F

CLASSES = 10
VOCAB = 50
JITTER = 4  # perturbed float32 runs that measure float32's own error
OTHER_ISA_RUNS = 2  # of those, under the other oneDNN ISA (cmd_check)
ZERO_TOL = 1e-5  # error bound of zero gradients, relative to the largest
SEQ = 8


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

class SqueezeExcite(nn.Module):
    def __init__(self, c, r=4, gate=nn.Sigmoid):
        super().__init__()
        self.reduce = nn.Conv2d(c, c // r, 1)
        self.expand = nn.Conv2d(c // r, c, 1)
        self.act = nn.SiLU()
        self.gate = gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.expand(self.act(self.reduce(s))))


class MBConv(nn.Module):
    """EfficientNet's inverted residual: expand, depthwise, squeeze-excite,
    project, residual."""

    def __init__(self, c, expand=4, act=nn.SiLU, gate=nn.Sigmoid):
        super().__init__()
        h = c * expand
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False),
                                    nn.BatchNorm2d(h), act())
        self.depthwise = nn.Sequential(
            nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False),
            nn.BatchNorm2d(h), act())
        self.se = SqueezeExcite(h, gate=gate)
        self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False),
                                     nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.project(self.se(self.depthwise(self.expand(x))))


class EfficientNetTiny(nn.Module):
    """SiLU + sigmoid squeeze-excitation (EfficientNet) and a
    HardSwish + HardSigmoid block (MobileNetV3)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1,
                                            bias=False),
                                  nn.BatchNorm2d(8), nn.SiLU())
        self.block1 = MBConv(8)
        self.block2 = MBConv(8, act=nn.Hardswish, gate=nn.Hardsigmoid)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x):
        x = self.block2(self.block1(self.stem(x)))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class UNetTiny(nn.Module):
    """Encoder-decoder with Concat skips, a ConvTranspose and a nearest
    Upsample (Resize) on the way up, then a classifier head."""

    def __init__(self):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(o), nn.ReLU())

        self.enc1 = block(3, 8)
        self.enc2 = block(8, 16)
        self.bottom = block(16, 16)
        self.up2 = nn.ConvTranspose2d(16, 16, 2, stride=2)
        self.dec2 = block(32, 8)
        self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec1 = block(16, 8)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, x):
        e1 = self.enc1(x)                       # 8 x 16 x 16
        e2 = self.enc2(F.max_pool2d(e1, 2))     # 16 x 8 x 8
        b = self.bottom(F.max_pool2d(e2, 2))    # 16 x 4 x 4
        d2 = self.dec2(torch.cat([self.up2(b), e2], 1))   # 8 x 8 x 8
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))  # 8 x 16 x 16
        return self.head(torch.flatten(F.adaptive_avg_pool2d(d1, 1), 1))


class RecurrentClassifier(nn.Module):
    """Classifies from the mean output over time plus the final states, so
    every step of every direction, Y_h and (LSTM) Y_c carry a gradient."""

    def __init__(self, cell, bidirectional=False):
        super().__init__()
        self.rnn = cell(8, 16, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(16 * (2 if bidirectional else 1), CLASSES)

    def forward(self, x):
        y, states = self.rnn(x)
        feat = y.mean(1)
        for s in states if isinstance(states, tuple) else (states,):
            # [D, B, H] -> [B, D*H], directions side by side like y's.
            feat = feat + s.transpose(0, 1).reshape(x.shape[0], -1)
        return self.head(feat)


def vit_tiny():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=16, patch_size=4, num_layers=2,
                             num_heads=2, hidden_dim=32, mlp_dim=64,
                             num_classes=CLASSES)


class TinyEncoder(nn.Module):
    """BERT-like: token and position embeddings, nn.TransformerEncoder with a
    padding mask computed from the token ids (Equal -> Where), mean pool,
    classifier."""

    def __init__(self, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.tok = nn.Embedding(VOCAB, 32)
        self.pos = nn.Parameter(torch.randn(1, SEQ, 32) * 0.02)
        layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0,
                                           activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, ids):
        pad = ids == self.pad_id
        x = self.encoder(self.tok(ids) + self.pos, src_key_padding_mask=pad)
        return self.head(x.mean(1))


class CausalBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // h) ** 0.5)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TinyGPT(nn.Module):
    """GPT-2-like causal decoder: token ids in, logits [B, T, V] out; the
    loss is next-token cross-entropy."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, 32)
        self.pos = nn.Embedding(SEQ, 32)
        self.blocks = nn.Sequential(CausalBlock(32, 2), CausalBlock(32, 2))
        self.ln = nn.LayerNorm(32)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1])
        x = self.blocks(self.tok(ids) + self.pos(pos))
        return self.head(self.ln(x))


def swin_tiny():
    """torchvision's SwinTransformer, small: shifted windows (Roll as
    Slice + Concat, the attention mask built with ScatterND), window padding
    (Pad whose pads come from a folded shape chain), relative position bias
    (Gather from a table), patch merging."""
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[2, 2], embed_dim=16, depths=[2, 2],
                           num_heads=[2, 4], window_size=[6, 6],
                           stochastic_depth_prob=0.0, num_classes=CLASSES)


class ActivationCNN(nn.Module):
    """The activations beyond ReLU that CNNs and MLP heads use: PReLU (a
    learned slope per channel), Softplus, Softsign, SELU, CELU, and
    elementwise maximum/minimum of two branches."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.prelu = nn.PReLU(8, init=0.2)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 16)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        x = self.prelu(self.conv1(x))
        a = F.softplus(self.conv2(x))
        b = F.softsign(self.conv3(x)) * 2
        x = torch.maximum(a, b) + 0.5 * torch.minimum(a, b)
        x = F.selu(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return self.head(F.celu(self.fc(x), alpha=0.5))


class GroupNormBlock(nn.Module):
    """ResNet's basic block with GroupNorm in place of BatchNorm."""

    def __init__(self, c, groups=4):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.gn1 = nn.GroupNorm(groups, c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.gn2 = nn.GroupNorm(groups, c)

    def forward(self, x):
        y = F.relu(self.gn1(self.conv1(x)))
        return F.relu(x + self.gn2(self.conv2(y)))


class GroupNormResNet(nn.Module):
    """A small ResNet with GroupNorm (exported at opset 17 as
    InstanceNormalization over the groups, then a per-channel affine)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False),
                                  nn.GroupNorm(4, 16), nn.ReLU())
        self.block1 = GroupNormBlock(16)
        self.block2 = GroupNormBlock(16, groups=8)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        x = self.block2(self.block1(self.stem(x)))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def sinusoidal(t, dim):
    """Transformer/diffusion timestep embedding: sin and cos of t times
    geometric frequencies, computed in the graph."""
    freqs = torch.exp(-math.log(10000.0) * torch.arange(dim // 2) / (dim // 2))
    angles = t[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class DiffusionBlock(nn.Module):
    """A diffusion UNet's residual block: GroupNorm, SiLU, conv, and the
    timestep embedding added per channel."""

    def __init__(self, c, tdim):
        super().__init__()
        self.norm1 = nn.GroupNorm(4, c)
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.temb = nn.Linear(tdim, c)
        self.norm2 = nn.GroupNorm(4, c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x, emb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(emb)[:, :, None, None]
        return x + self.conv2(F.silu(self.norm2(h)))


class DiffusionUNetTiny(nn.Module):
    """Diffusion-style UNet: sinusoidal timestep embedding (Sin, Cos) of a
    timestep derived from the input, GroupNorm + SiLU residual blocks, a
    self-attention block at the low resolution, ConvTranspose up, Concat
    skip, classifier head."""

    def __init__(self):
        super().__init__()
        self.tdim = 16
        self.tmlp = nn.Sequential(nn.Linear(16, 32), nn.SiLU(),
                                  nn.Linear(32, 16))
        self.inp = nn.Conv2d(3, 16, 3, padding=1)
        self.down = DiffusionBlock(16, 16)
        self.pool = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.mid = DiffusionBlock(16, 16)
        self.attn_norm = nn.GroupNorm(4, 16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.up = nn.ConvTranspose2d(16, 16, 2, stride=2)
        self.dec = DiffusionBlock(32, 16)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x):
        t = x.mean((1, 2, 3)) * 100.0
        emb = self.tmlp(sinusoidal(t, self.tdim))
        h1 = self.down(self.inp(x), emb)
        h = self.mid(self.pool(h1), emb)
        b, c, hh, ww = h.shape
        s = self.attn_norm(h).flatten(2).transpose(1, 2)
        a, _ = self.attn(s, s, s, need_weights=False)
        h = h + a.transpose(1, 2).reshape(b, c, hh, ww)
        h = self.dec(torch.cat([self.up(h), h1], 1), emb)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


class EinsumMixer(nn.Module):
    """Token and channel mixing written with torch.einsum, as T5-style and
    Mixer code does: batched products with a contraction ('btc,cd->btd'),
    an ellipsis ('...tc,st->...sc'), attention scores and weights over
    heads ('bhqd,bhkd->bhqk', 'bhqk,bhkd->bhqd'), a summed-away label
    ('btc->bc') and an outer-product gate ('bc,bd->bcd')."""

    def __init__(self):
        super().__init__()
        t, c, h = 6, 8, 2
        self.embed = nn.Parameter(torch.randn(8, c) * 0.3)
        self.mix = nn.Parameter(torch.randn(t, t) * 0.3)
        self.qk = nn.Parameter(torch.randn(c, 2 * c) * 0.3)
        self.gate = nn.Parameter(torch.randn(c, 4) * 0.3)
        self.head = nn.Linear(c * 4, CLASSES)
        self.h = h

    def forward(self, x):
        b, t, _ = x.shape
        x = torch.einsum("btc,cd->btd", x, self.embed)
        x = x + torch.einsum("...tc,st->...sc", x, self.mix)
        q, k = torch.einsum("btc,cd->btd", x, self.qk).chunk(2, dim=-1)
        q = q.reshape(b, t, self.h, -1).transpose(1, 2)
        k = k.reshape(b, t, self.h, -1).transpose(1, 2)
        att = torch.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1)
        v = x.reshape(b, t, self.h, -1).transpose(1, 2)
        y = torch.einsum("bhqk,bhkd->bhqd", att, v)
        pooled = torch.einsum("btc->bc", y.transpose(1, 2).reshape(b, t, -1))
        g = torch.einsum("bc,bd->bcd", pooled, pooled @ self.gate)
        return self.head(g.reshape(b, -1))


class SuperResolution(nn.Module):
    """Super-resolution style: sub-pixel upsampling (PixelShuffle as
    DepthToSpace) and its inverse (PixelUnshuffle as SpaceToDepth), global
    max pooling, a repeated (Tile) feature and L2/L1 norms of features
    (ReduceL2, ReduceL1) in the head."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.unshuffle = nn.PixelUnshuffle(2)
        self.conv3 = nn.Conv2d(32, 8, 1)
        self.head = nn.Linear(8 * 2 + 2, CLASSES)

    def forward(self, x):
        y = self.conv2(torch.relu(self.shuffle(self.conv1(x))))
        y = self.conv3(self.unshuffle(torch.relu(y)))
        g = F.adaptive_max_pool2d(y, 1).flatten(1)
        l2 = torch.linalg.vector_norm(y, 2, dim=(1, 2, 3)).unsqueeze(1)
        l1 = y.abs().sum((1, 2, 3)).unsqueeze(1) * 0.01
        feat = torch.cat([g.repeat(1, 2), l2, l1], 1)
        return self.head(feat)


class GatherScatter(nn.Module):
    """torch.gather and scatter along an axis, as routing, relative-position
    and pooling code uses them: gather by a fixed index table (with
    repeats), scatter_add into buckets (several elements per bucket) and a
    scatter that replaces elements (GatherElements, ScatterElements with and
    without reduction)."""

    def __init__(self):
        super().__init__()
        t, c = 6, 8
        g = torch.Generator().manual_seed(5)
        self.register_buffer("route", torch.randint(0, c, (1, t, c), generator=g))
        self.register_buffer("bucket", torch.randint(0, 4, (1, t, c), generator=g))
        self.register_buffer("place", torch.randperm(t, generator=g)[:3].reshape(1, 3, 1).expand(1, 3, c).clone())
        self.proj = nn.Linear(c, c)
        self.src = nn.Parameter(torch.randn(1, 3, c) * 0.5)
        self.head = nn.Linear(t * c + t * 4, CLASSES)

    def forward(self, x):
        b = x.shape[0]
        h = torch.tanh(self.proj(x))
        routed = torch.gather(h, 2, self.route.expand(b, -1, -1))
        weighted = h * routed
        pooled = weighted.new_zeros(b, h.shape[1], 4).scatter_add(
            2, self.bucket.expand(b, -1, -1), weighted)
        placed = routed.scatter(1, self.place.expand(b, -1, -1),
                                self.src.expand(b, -1, -1).to(routed.dtype))
        return self.head(torch.cat([placed.flatten(1), pooled.flatten(1)], 1))


class Reductions(nn.Module):
    """Max, min and log-sum-exp reductions (torch.amax, amin, logsumexp),
    the max over ReLU outputs full of tied zeros, whose gradient is shared
    among the ties, and running sums (torch.cumsum)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8 * 4 + 6, CLASSES)

    def forward(self, x):
        h = self.conv(x)
        r = torch.relu(h - 0.3)
        feat = [torch.amax(r, dim=(2, 3)), torch.amin(h, dim=(2, 3)),
                torch.logsumexp(h.flatten(2), dim=2),
                torch.cumsum(h, dim=2).mean((2, 3)),
                torch.amax(r, dim=1).flatten(1)[:, :6]]
        return self.head(torch.cat(feat, 1))


class IndexSelect(nn.Module):
    """Selection by index: top-k routing scores whose values train
    (torch.topk, TopK), advanced indexing by two index tensors, products
    (torch.prod, ReduceProd, one with a zero in each column), fmod and
    remainder, floor and round (Mod, Floor, Round: no gradient through the
    rounding), and the one-hot of an argmax as a mask (ArgMax, OneHot)."""

    def __init__(self):
        super().__init__()
        t, c = 6, 8
        g = torch.Generator().manual_seed(7)
        self.register_buffer("rows", torch.randint(0, t, (5,), generator=g))
        self.register_buffer("cols", torch.randint(0, c, (5,), generator=g))
        self.proj = nn.Linear(c, c)
        # Starts at zero: its gradient is the product of the others.
        self.zero = nn.Parameter(torch.zeros(1, 1, c))
        self.head = nn.Linear(t * 3 + 5 + c + t * c + t, CLASSES)

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        top, _ = torch.topk(h, 3, dim=2)
        picked = h[:, self.rows, self.cols]
        z = self.zero.expand(h.shape[0], -1, -1)
        prod = torch.prod(1 + 0.5 * h, dim=1) + \
            torch.prod(torch.cat([1 + 0.5 * h[:, 1:], z], 1), dim=1)
        wrapped = torch.fmod(h * 3, 0.7) + torch.remainder(h * 3, 0.7) + \
            0.1 * torch.floor(h * 4) + 0.1 * torch.round(h * 4)
        mask = F.one_hot(torch.argmax(h, dim=2), h.shape[2]).to(h.dtype)
        chosen = (mask * h).sum(2)
        return self.head(torch.cat([top.flatten(1), picked, prod,
                                    wrapped.flatten(1), chosen], 1))


# name -> (constructor, input kind, input shape per sample)
MODELS = {
    "reductions": (Reductions, "image", (3, 6, 6)),
    "gather-scatter": (GatherScatter, "image", (6, 8)),
    "index-select": (IndexSelect, "image", (6, 8)),
    "superres": (SuperResolution, "image", (3, 6, 6)),
    "einsum": (EinsumMixer, "image", (6, 8)),
    "activations": (ActivationCNN, "image", (3, 8, 8)),
    "groupnorm-resnet": (GroupNormResNet, "image", (3, 8, 8)),
    "diffusion-unet": (DiffusionUNetTiny, "image", (3, 8, 8)),
    "efficientnet": (EfficientNetTiny, "image", (3, 16, 16)),
    "unet": (UNetTiny, "image", (3, 16, 16)),
    "lstm": (lambda: RecurrentClassifier(nn.LSTM), "image", (6, 8)),
    "lstm-bidir": (lambda: RecurrentClassifier(nn.LSTM, True), "image",
                   (6, 8)),
    "gru": (lambda: RecurrentClassifier(nn.GRU), "image", (6, 8)),
    "vit": (vit_tiny, "image", (3, 16, 16)),
    "swin": (swin_tiny, "image", (3, 16, 16)),
    "bert": (TinyEncoder, "tokens", (SEQ,)),
    "gpt": (TinyGPT, "next-token", (SEQ,)),
}


def torchvision_classifier(arch, **kwargs):
    def make():
        import torchvision
        return getattr(torchvision.models, arch)(num_classes=CLASSES, **kwargs)
    return make


# torchvision's classification zoo at 32x32 (64x64 where the network's
# downsampling needs it), every Dropout and stochastic depth at p = 0 so the
# exported training graph is deterministic.
TORCHVISION = {
    "resnet18": (3, 64, 64),
    "resnext50_32x4d": (3, 64, 64),
    "wide_resnet50_2": (3, 64, 64),
    "mobilenet_v2": (3, 64, 64),
    "mobilenet_v3_small": (3, 64, 64),
    "mnasnet0_5": (3, 64, 64),
    "shufflenet_v2_x0_5": (3, 64, 64),
    "squeezenet1_1": (3, 64, 64),
    "densenet121": (3, 64, 64),
    "regnet_y_400mf": (3, 64, 64),
    "efficientnet_b0": (3, 64, 64),
    "convnext_tiny": (3, 64, 64),
    "googlenet": (3, 64, 64),
}
for _arch, _shape in TORCHVISION.items():
    _kwargs = {"aux_logits": False, "init_weights": True} \
        if _arch == "googlenet" else {}
    MODELS["tv-" + _arch] = (torchvision_classifier(_arch, **_kwargs),
                             "image", _shape)


def build(name, seed):
    torch.manual_seed(seed)
    model = MODELS[name][0]()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if type(m).__name__ == "StochasticDepth":
            m.p = 0.0
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
            # torchvision zero-initialises ViT's head (and class token), which
            # would zero every other gradient: give them values.
            if isinstance(m, nn.Linear) and not m.weight.any():
                m.weight.normal_(0, 0.2)
        for name, p in model.named_parameters():
            if not p.any():
                p.normal_(0, 0.2)
    return model


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    code, rank = data[2], data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    dtype = ">f4" if code == 0x0D else np.uint8
    return np.frombuffer(data[4 + 4 * rank:], dtype=dtype).reshape(dims)


def make_batch(name, batch, seed):
    """(inputs, labels) of one batch, as numpy arrays."""
    kind, shape = MODELS[name][1], MODELS[name][2]
    rng = np.random.RandomState(seed)
    if kind == "image":
        x = rng.standard_normal((batch,) + shape).astype(np.float32)
        return x, rng.randint(0, CLASSES, size=batch)
    ids = rng.randint(1, VOCAB, size=(batch, SEQ + 1)).astype(np.int64)
    if kind == "tokens":
        ids[: batch // 2, SEQ - 2:] = 0  # padded tails
        return ids[:, :SEQ], rng.randint(0, CLASSES, size=batch)
    return ids[:, :SEQ], ids[:, 1:]


def cmd_batch(a):
    x, y = make_batch(a.model, a.batch, a.seed)
    os.makedirs(a.dir, exist_ok=True)
    if MODELS[a.model][1] == "image":
        write_idx(os.path.join(a.dir, "train-images-idx3-ubyte"), x, 0x0D)
        write_idx(os.path.join(a.dir, "train-labels-idx1-ubyte"), y, 0x08)
        print(f"mnist:{a.dir}")
    else:
        # oasr-run's tokens:FILE: u16 ids; next-token models read windows of
        # SEQ + 1 at stride SEQ, classifiers SEQ tokens and FILE.labels.
        path = os.path.join(a.dir, "tokens.bin")
        if MODELS[a.model][1] == "next-token":
            stream = np.concatenate([x.reshape(-1), y[-1:, -1]])
            x, y = stream[:-1].reshape(x.shape), stream[1:].reshape(x.shape)
        else:
            stream = x.reshape(-1)
            y.astype("<i8").tofile(path + ".labels")
        stream.astype("<u2").tofile(path)
        np.save(os.path.join(a.dir, "ids.npy"), x)
        np.save(os.path.join(a.dir, "labels.npy"), y)
        print(f"tokens:{path}")


def load_batch(name, d):
    if MODELS[name][1] == "image":
        x = read_idx(os.path.join(d, "train-images-idx3-ubyte")).astype(np.float32)
        y = read_idx(os.path.join(d, "train-labels-idx1-ubyte")).astype(np.int64)
        return x.reshape((x.shape[0],) + MODELS[name][2]), y
    return np.load(os.path.join(d, "ids.npy")), np.load(os.path.join(d, "labels.npy"))


def cmd_export(a):
    model = build(a.model, a.seed)
    model.train()
    x, _ = make_batch(a.model, a.batch, a.seed + 1)
    torch.onnx.export(model, torch.from_numpy(x), a.out,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17,
                      input_names=["input"], output_names=["output"],
                      **torchscript_exporter())
    print(f"wrote {a.out}")


# ---------------------------------------------------------------------------
# Reference and comparison
# ---------------------------------------------------------------------------

def read_dump(path):
    """{name: (value, grad)} and the loss of an oasr-run gradient dump."""
    if path.endswith(".npz"):
        z = np.load(path)
        loss = float(z["loss"])
        grads = {k[:-len(".grad")]: z[k] for k in z.files if k.endswith(".grad")}
        values = {k[:-len(".value")]: z[k] for k in z.files if k.endswith(".value")}
        return {k: (values.get(k), g) for k, g in grads.items()}, loss
    d = json.load(open(path))
    return ({k: (np.asarray(v["value"]), np.asarray(v["grad"]))
             for k, v in d["params"].items()}, d["loss"])


def reference(name, seed, params, x, y, dtype, jitter=None, autocast=False,
              jitter_scale=2.0 ** -24):
    """Loss and gradients of PyTorch in `dtype` on the dumped weights; with
    `jitter` (a seed), every weight is first scaled by 1 + u * jitter_scale,
    u uniform in [-1, 1] (2^-24: a float32 rounding-level perturbation).
    `autocast` runs forward and loss under torch.autocast("cpu", bfloat16)
    (a float32 model), as PyTorch's mixed precision does."""
    model = build(name, seed).to(dtype)
    model.train()
    named = dict(model.named_parameters())
    missing = sorted(set(named) - set(params))
    if missing:
        sys.exit(f"parameters missing from the dump: {missing}")
    rng = np.random.default_rng(jitter) if jitter is not None else None
    with torch.no_grad():
        for k, p in named.items():
            w = np.asarray(params[k][0], dtype=np.float64)
            if rng is not None:
                w = w * (1 + rng.uniform(-1, 1, w.shape) * jitter_scale)
            p.copy_(torch.tensor(w, dtype=dtype).reshape(p.shape))
    xt = torch.from_numpy(x)
    if xt.is_floating_point():
        xt = xt.to(dtype)
    if autocast:
        # Some torch releases' CPU autocast hands GroupNorm a bf16 input
        # with f32 weights and fails; run it in float32, as autocast's
        # CUDA policy lists group_norm.
        for m in model.modules():
            if isinstance(m, nn.GroupNorm):
                m.forward = (lambda g: lambda v: F.group_norm(
                    v.float(), g.num_groups, g.weight, g.bias, g.eps))(m)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(xt)
        logits = logits.float()
    else:
        logits = model(xt)
    yt = torch.from_numpy(y)
    if logits.dim() == 3:  # next-token: [B, T, V] against [B, T]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yt.reshape(-1))
    else:
        loss = F.cross_entropy(logits, yt)
    loss.backward()
    return loss.item(), {k: p.grad.detach().double().numpy().reshape(-1)
                         for k, p in named.items()}


def initial_weights_match(name, seed, params):
    """Whether oasr started from the seeded PyTorch model's weights, name by
    name: a first-step dump at --lr=0 holds the weights the step used, which
    are the exported ONNX initializers as oasr-run loaded them. Prints one
    line, and one more per parameter that differs."""
    model = build(name, seed)
    named = {k: p.detach().float().numpy().reshape(-1)
             for k, p in model.named_parameters()}
    differ = [k for k, w in named.items()
              if k in params and params[k][0] is not None and not np.array_equal(
                  np.asarray(params[k][0], dtype=np.float32).reshape(-1), w)]
    print(f"initial weights: {len(named) - len(differ)} of {len(named)} "
          "parameters equal the seeded PyTorch model's")
    for k in differ:
        got = np.asarray(params[k][0], dtype=np.float64).reshape(-1)
        want = named[k].astype(np.float64)
        diff = (np.abs(got - want).max() if got.shape == want.shape
                else f"{got.size} values, expected {want.size}")
        print(f"{k}: initial weights differ from the seeded model's (max "
              f"|diff| {diff}; check reads a first-step dump at --lr=0) MISMATCH")
    return not differ


def reduction_length(name, seed):
    """The longest sum of products in one output of the model's products
    (Conv: in_channels / groups x kernel elements; Linear: in_features)."""
    longest = 1
    for m in build(name, seed).modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            longest = max(longest, m.in_channels // m.groups *
                          int(np.prod(m.kernel_size)))
        elif isinstance(m, nn.Linear):
            longest = max(longest, m.in_features)
    return longest


def peer_options(a):
    """How the peer's runs perturb the weights: at bf16's rounding with
    --precision bf16; else at float32's rounding scaled by sqrt(K), K the
    model's longest reduction. A K-term float32 sum carries rounding noise
    of about u sqrt(K) of its terms' magnitude, which rounding-level weight
    jitter alone (u) underestimates by sqrt(K): where a ReLU input sits
    within that noise of zero (DenseNet-121 at 64x64 has ReLU inputs within
    2e-7 of their tensor's largest value), which side a float32 kernel lands on
    depends on its summation order, so the envelope must sample both."""
    if a.precision == "bf16":
        return dict(autocast=True, jitter_scale=2.0 ** -9)
    return dict(jitter_scale=2.0 ** -24 * np.sqrt(reduction_length(a.model, a.seed)))


def peer_runs(a, params, x, y, seeds, **peer):
    """(loss, gradients) of the peer's float32 (or autocast) runs on the
    dumped weights: `seeds` None for unperturbed, else a jitter seed."""
    return [reference(a.model, a.seed, params, x, y, torch.float32, jitter=j,
                      **peer) for j in seeds]


def other_isa_runs(a):
    """The same peer runs in a child process under the other oneDNN ISA:
    capped at AVX2 when this process is not, uncapped when it is."""
    import subprocess
    import tempfile
    env = dict(os.environ)
    if env.pop("ONEDNN_MAX_CPU_ISA", None) is None:
        env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "peer.npz")
        subprocess.run([sys.executable, os.path.abspath(__file__), "peer-runs",
                        a.model, a.dump, "--data", a.data, "--seed",
                        str(a.seed), "--precision", a.precision, "--out", out],
                       env=env, check=True)
        z = np.load(out)
        runs = []
        for k in range(OTHER_ISA_RUNS):
            grads = {n[len(f"{k}/"):]: z[n] for n in z.files
                     if n.startswith(f"{k}/") and n != f"{k}/loss"}
            runs.append((float(z[f"{k}/loss"]), grads))
        return runs


def cmd_peer_runs(a):
    params, _ = read_dump(a.dump)
    x, y = load_batch(a.model, a.data)
    peer = peer_options(a)
    seeds = [None] + [100 + j for j in range(OTHER_ISA_RUNS - 1)]
    arrays = {}
    for k, (loss, grads) in enumerate(peer_runs(a, params, x, y, seeds, **peer)):
        arrays[f"{k}/loss"] = np.float64(loss)
        for n, g in grads.items():
            arrays[f"{k}/{n}"] = g
    np.savez(a.out, **arrays)


def cmd_check(a):
    params, loss = read_dump(a.dump)
    x, y = load_batch(a.model, a.data)
    initial_ok = initial_weights_match(a.model, a.seed, params)
    loss64, g64 = reference(a.model, a.seed, params, x, y, torch.float64)
    # Float32's own error, as the worst of PyTorch's float32 run on the
    # weights as dumped and on JITTER runs with rounding-level perturbed
    # weights: where a pre-activation sits within float32's noise of a ReLU
    # kink (or a gradient is zero in exact arithmetic, e.g. a BatchNorm bias
    # feeding another BatchNorm), which side float32 lands on is luck, and
    # one unperturbed PyTorch run would make the bound luck too.
    low = a.precision == "bf16"
    # The peer's own error: float32, or PyTorch's bf16 autocast, on the
    # weights as dumped and on perturbed ones (at that type's rounding).
    peer = peer_options(a)
    floor = 2.0 ** -8 if low else 1e-4
    zero_tol = 2.0 ** -8 if low else ZERO_TOL
    mine = peer_runs(a, params, x, y, [None] + list(range(JITTER)), **peer)
    # Not for bf16: capped below AVX-512, PyTorch still takes oneDNN's bf16
    # convolution (it reads cpuid), which the cap removes.
    done = mine + (other_isa_runs(a) if not low else [])
    runs, peer_losses = [r[1] for r in done], [r[0] for r in done]
    lrel = abs(loss - loss64) / max(abs(loss64), 1e-12)
    lpeer = max(abs(l - loss64) for l in peer_losses) / max(abs(loss64), 1e-12)
    lbound = max(floor, 2 * lpeer) if low else 1e-4
    ok = lrel <= lbound
    print(f"loss: oasr {loss:.7g} torch64 {loss64:.7g} rel {lrel:.2e}"
          + (f" (torch autocast {lpeer:.2e}, bound {lbound:.2e})" if low else ""))
    worst = 0.0
    # A gradient that is zero in exact arithmetic (a BatchNorm bias whose
    # shift the next BatchNorm removes) has no relative error to speak of:
    # float64 leaves ~1e-17 there and float32 ~1e-8. Such a parameter passes
    # when its error is below ZERO_TOL of the largest parameter gradient.
    gmax = max(np.linalg.norm(g) for g in g64.values())
    for k in sorted(g64):
        want = g64[k]
        got = np.asarray(params[k][1], dtype=np.float64).reshape(-1)
        if got.shape != want.shape:
            print(f"{k}: {got.size} gradient values, expected {want.size} MISMATCH")
            ok = False
            continue
        if np.linalg.norm(want) <= 1e-12 * gmax:
            err = np.linalg.norm(got - want) / gmax
            status = "ok" if err <= zero_tol else "MISMATCH"
            ok &= err <= zero_tol
            worst = max(worst, err / zero_tol)
            print(f"{k}: zero in exact arithmetic, err {err:.2e} of the largest "
                  f"gradient (bound {zero_tol:.0e}) {status}")
            continue
        norm = max(np.linalg.norm(want), 1e-30)
        err = np.linalg.norm(got - want) / norm
        err32 = max(np.linalg.norm(g[k] - want) for g in runs) / norm
        bound = max(floor, 2 * err32)
        status = "ok" if err <= bound else "MISMATCH"
        ok &= err <= bound
        worst = max(worst, err / bound)
        peer_name = "torch autocast" if low else "torch f32"
        print(f"{k}: err {err:.2e} ({peer_name} {err32:.2e}, bound {bound:.2e}) {status}")
    ok &= initial_ok
    print(f"{'PASS' if ok else 'FAIL'}: {len(g64)} parameters, "
          f"worst err/bound {worst:.2f}")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    e = sub.add_parser("export")
    e.add_argument("model", choices=sorted(MODELS))
    e.add_argument("out")
    e.add_argument("--batch", type=int, default=4)
    e.add_argument("--seed", type=int, default=0)
    b = sub.add_parser("batch")
    b.add_argument("model", choices=sorted(MODELS))
    b.add_argument("dir")
    b.add_argument("--batch", type=int, default=4)
    b.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("check")
    c.add_argument("model", choices=sorted(MODELS))
    c.add_argument("dump")
    c.add_argument("--data", required=True)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    r = sub.add_parser("peer-runs")  # cmd_check's child (other_isa_runs)
    r.add_argument("model", choices=sorted(MODELS))
    r.add_argument("dump")
    r.add_argument("--data", required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    r.add_argument("--out", required=True)
    a = p.parse_args()
    if a.cmd == "list":
        print("\n".join(sorted(MODELS)))
        return 0
    return {"export": cmd_export, "batch": cmd_batch, "check": cmd_check,
            "peer-runs": cmd_peer_runs}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
