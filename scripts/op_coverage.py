#!/usr/bin/python3
"""Which ONNX ops the training graphs of common model families use, and
whether oasr's op registry covers each (docs/generated/OpCoverage.md).

Run with Debian's interpreter (python3-torch 1.13, python3-torchvision,
python3-onnx):

  op_coverage.py export [-o docs/generated/op-coverage.json] [--only NAME,...]
      Exports every model below with oasr.export (training mode, opset 17,
      no oasr-run check) and writes each one's op inventory: per (domain,
      op, opset of import) the number of nodes, how many lie on a path from
      a trained parameter to the loss (they need a gradient rule), and how
      many compute small integers from constants only (shape arithmetic the
      importer can fold). A model that fails to export is recorded with the
      error. Slow (minutes); the table below is not.
  op_coverage.py table [--json FILE] [--op-table FILE | --translate BIN]
                       [-o docs/generated/OpCoverage.md | --check PAGE]
      Joins that inventory with the registry's table (`oasr-translate
      --print-op-table`) and writes the coverage page; with --check PAGE,
      fails with a diff unless PAGE is what it would write
      (test/docs/op-coverage.test).
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JSON_PATH = os.path.join(ROOT, "docs", "generated", "op-coverage.json")
PAGE_PATH = os.path.join(ROOT, "docs", "generated", "OpCoverage.md")
REGENERATE = ("scripts/op_coverage.py table --translate build/bin/oasr-translate"
              " -o docs/generated/OpCoverage.md")
CLASSES = 10


class CoverageError(Exception):
    pass


# ---------------------------------------------------------------------------
# Models (built only by `export`)
# ---------------------------------------------------------------------------

def _timm_models():
    """ViT, ConvNeXt and EfficientNet written the way timm writes them (timm
    is not packaged for Debian): fused qkv attention by hand with LayerScale,
    channels-last LayerNorm blocks, SiLU inverted residuals with
    squeeze-excite, and DropPath as a Bernoulli mask in all three."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def drop_path(x, p, training):
        if p == 0.0 or not training:
            return x
        keep = 1.0 - p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask.div_(keep)

    class DropPath(nn.Module):
        def __init__(self, p):
            super().__init__()
            self.p = p

        def forward(self, x):
            return drop_path(x, self.p, self.training)

    class Attention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads, self.scale = heads, (dim // heads) ** -0.5
            self.qkv = nn.Linear(dim, dim * 3)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            b, n, c = x.shape
            qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            att = ((q * self.scale) @ k.transpose(-2, -1)).softmax(-1)
            return self.proj((att @ v).transpose(1, 2).reshape(b, n, c))

    class ViTBlock(nn.Module):
        def __init__(self, dim, heads, dp):
            super().__init__()
            self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
            self.ls1 = nn.Parameter(1e-5 * torch.ones(dim))
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(),
                                     nn.Dropout(0.1), nn.Linear(4 * dim, dim))
            self.ls2 = nn.Parameter(1e-5 * torch.ones(dim))
            self.drop = DropPath(dp)

        def forward(self, x):
            x = x + self.drop(self.ls1 * self.attn(self.norm1(x)))
            return x + self.drop(self.ls2 * self.mlp(self.norm2(x)))

    class ViT(nn.Module):
        def __init__(self, img=32, patch=8, dim=32, depth=2, heads=2):
            super().__init__()
            self.patch = nn.Conv2d(3, dim, patch, patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos = nn.Parameter(0.02 * torch.randn(1, (img // patch) ** 2 + 1, dim))
            self.blocks = nn.Sequential(*[ViTBlock(dim, heads, 0.1)
                                          for _ in range(depth)])
            self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, CLASSES)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
            return self.head(self.norm(self.blocks(x))[:, 0])

    class LayerNorm2d(nn.LayerNorm):
        def forward(self, x):
            x = x.permute(0, 2, 3, 1)
            x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias,
                             self.eps)
            return x.permute(0, 3, 1, 2)

    class ConvNeXtBlock(nn.Module):
        def __init__(self, dim, dp):
            super().__init__()
            self.conv_dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(),
                                     nn.Linear(4 * dim, dim))
            self.gamma = nn.Parameter(1e-6 * torch.ones(dim))
            self.drop = DropPath(dp)

        def forward(self, x):
            h = self.norm(self.conv_dw(x).permute(0, 2, 3, 1))
            h = self.mlp(h).mul(self.gamma).permute(0, 3, 1, 2)
            return x + self.drop(h)

    class ConvNeXt(nn.Module):
        def __init__(self, dims=(16, 32)):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, 4),
                                      LayerNorm2d(dims[0], eps=1e-6))
            self.stage1 = ConvNeXtBlock(dims[0], 0.1)
            self.down = nn.Sequential(LayerNorm2d(dims[0], eps=1e-6),
                                      nn.Conv2d(dims[0], dims[1], 2, 2))
            self.stage2 = ConvNeXtBlock(dims[1], 0.1)
            self.norm = nn.LayerNorm(dims[1], eps=1e-6)
            self.head = nn.Linear(dims[1], CLASSES)

        def forward(self, x):
            x = self.stage2(self.down(self.stage1(self.stem(x))))
            return self.head(self.norm(x.mean((2, 3))))

    class SqueezeExcite(nn.Module):
        def __init__(self, c, r):
            super().__init__()
            self.conv_reduce = nn.Conv2d(c, r, 1)
            self.conv_expand = nn.Conv2d(r, c, 1)

        def forward(self, x):
            s = self.conv_expand(F.silu(self.conv_reduce(x.mean((2, 3), keepdim=True))))
            return x * s.sigmoid()

    def conv_bn(cin, cout, k, stride=1, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups,
                            bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, nn.SiLU()) if act else nn.Sequential(*layers)

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand, dp):
            super().__init__()
            mid = cin * expand
            self.conv_pw = conv_bn(cin, mid, 1)
            self.conv_dw = conv_bn(mid, mid, 3, stride, groups=mid)
            self.se = SqueezeExcite(mid, max(1, cin // 4))
            self.conv_pwl = conv_bn(mid, cout, 1, act=False)
            self.skip = stride == 1 and cin == cout
            self.drop = DropPath(dp)

        def forward(self, x):
            h = self.conv_pwl(self.se(self.conv_dw(self.conv_pw(x))))
            return x + self.drop(h) if self.skip else h

    class EfficientNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_stem = conv_bn(3, 16, 3, 2)
            self.dw = nn.Sequential(conv_bn(16, 16, 3, groups=16),
                                    SqueezeExcite(16, 4), conv_bn(16, 16, 1, act=False))
            self.blocks = nn.Sequential(InvertedResidual(16, 24, 2, 6, 0.0),
                                        InvertedResidual(24, 24, 1, 6, 0.1))
            self.conv_head = conv_bn(24, 64, 1)
            self.drop = nn.Dropout(0.2)
            self.classifier = nn.Linear(64, CLASSES)

        def forward(self, x):
            x = self.conv_stem(x)
            x = x + self.dw(x)
            x = self.conv_head(self.blocks(x))
            return self.classifier(self.drop(x.mean((2, 3))))

    return {"timm-vit": ViT, "timm-convnext": ConvNeXt,
            "timm-efficientnet": EfficientNet}


def _llama():
    """A LLaMA-style decoder: RMSNorm written out, rotary embeddings from
    cos/sin buffers, SwiGLU, a causal mask buffer, untied head."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    vocab, dim, heads, seq = 64, 32, 4, 8

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), -1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False)
                                                  for _ in range(4))
            self.w1 = nn.Linear(dim, 3 * dim, bias=False)
            self.w3 = nn.Linear(dim, 3 * dim, bias=False)
            self.w2 = nn.Linear(3 * dim, dim, bias=False)

        def forward(self, x, cos, sin, mask):
            b, t, _ = x.shape
            h = self.attn_norm(x)
            q, k, v = (w(h).view(b, t, heads, dim // heads).transpose(1, 2)
                       for w in (self.wq, self.wk, self.wv))
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            s = q @ k.transpose(2, 3) / math.sqrt(dim // heads) + mask
            y = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, dim)
            x = x + self.wo(y)
            h = self.ffn_norm(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList([Block(), Block()])
            self.norm, self.out = RMSNorm(dim), nn.Linear(dim, vocab, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, dim // heads, 2).float() / (dim // heads)))
            f = torch.outer(torch.arange(seq).float(), inv)
            emb = torch.cat([f, f], -1)
            self.register_buffer("cos", emb.cos(), persistent=False)
            self.register_buffer("sin", emb.sin(), persistent=False)
            self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1),
                                 persistent=False)

        def forward(self, ids):
            t = ids.shape[1]
            x = self.tok(ids)
            cos, sin, mask = self.cos[:t], self.sin[:t], self.mask[:t, :t]
            for layer in self.layers:
                x = layer(x, cos, sin, mask)
            return self.out(self.norm(x))

    return Llama, vocab, seq


def _with_head(backbone):
    """A detection backbone (a dict of feature maps) with a classifier on
    its pooled levels, so the export has logits to train."""
    import torch.nn as nn

    class WithHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = backbone
            self.head = nn.Linear(backbone.out_channels, CLASSES)

        def forward(self, x):
            feats = self.body(x)
            return self.head(sum(f.mean((2, 3)) for f in feats.values()))
    return WithHead()


def model_list():
    """name -> (family, make() -> (module, example input))."""
    import torch
    import torchvision
    from torchvision.models.detection import backbone_utils as bu
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7

    def image(size):
        return torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(1))

    def tv(arch, size=64, **kw):
        return lambda: (getattr(torchvision.models, arch)(num_classes=CLASSES, **kw),
                        image(size))

    models = collections.OrderedDict()
    for arch in ["resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2",
                 "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
                 "mnasnet0_5", "shufflenet_v2_x0_5", "squeezenet1_1",
                 "densenet121", "regnet_x_400mf", "regnet_y_400mf",
                 "efficientnet_b0", "efficientnet_v2_s", "convnext_tiny",
                 "swin_t", "swin_v2_t"]:
        models["tv-" + arch] = ("torchvision classifier", tv(arch))
    models["tv-googlenet"] = ("torchvision classifier",
                              tv("googlenet", aux_logits=False, init_weights=True))
    models["tv-inception_v3"] = ("torchvision classifier",
                                 tv("inception_v3", 96, aux_logits=False,
                                    init_weights=True))
    models["tv-vit"] = ("torchvision classifier", lambda: (
        torchvision.models.vision_transformer.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=2,
            hidden_dim=32, mlp_dim=64, num_classes=CLASSES), image(32)))
    models["tv-maxvit_t"] = ("torchvision classifier", tv("maxvit_t", 224))
    models["fpn-resnet18"] = ("detection backbone", lambda: (_with_head(
        bu.resnet_fpn_backbone(backbone_name="resnet18", weights=None,
                               trainable_layers=5)), image(64)))
    models["fpn-resnet50-p6p7"] = ("detection backbone", lambda: (_with_head(
        bu.resnet_fpn_backbone(backbone_name="resnet50", weights=None,
                               trainable_layers=5, returned_layers=[2, 3, 4],
                               extra_blocks=LastLevelP6P7(256, 256))), image(64)))
    models["fpn-mobilenet_v3_large"] = ("detection backbone", lambda: (_with_head(
        bu.mobilenet_backbone(backbone_name="mobilenet_v3_large", weights=None,
                              fpn=True, trainable_layers=6)), image(64)))
    for name, cls in _timm_models().items():
        models[name] = ("timm-style", lambda cls=cls: (cls(), image(32)))

    def llama():
        cls, vocab, seq = _llama()
        ids = torch.randint(0, vocab, (2, seq), generator=torch.Generator().manual_seed(1))
        return cls(), ids
    models["llama"] = ("LLaMA-style decoder", llama)

    def diffusion():
        sys.path.insert(0, HERE)
        import model_zoo
        x, _ = model_zoo.make_batch("diffusion-unet", 2, 1)
        return model_zoo.build("diffusion-unet", 0), torch.from_numpy(x)
    models["diffusion-unet"] = ("diffusion UNet (scripts/model_zoo.py)", diffusion)
    return models


# ---------------------------------------------------------------------------
# Inventory of one exported graph
# ---------------------------------------------------------------------------

FLOAT_TYPES = {1, 10, 11, 16}  # float, float16, double, bfloat16
INT_TYPES = {2, 3, 4, 5, 6, 7, 9, 12, 13}  # integers and bool
SHAPE_OPS = {"Shape", "Size"}


def inventory(path):
    """[(domain, op, opset, nodes, active, const_ints)] of an exported model.
    active: nodes with a float result that depends on a trained parameter
    and reaches the logits (autodiff's rule, passes/Autodiff.cpp). const_ints:
    nodes whose inputs and results are all integer or bool values computed
    from constants and shapes only (what the importer's fold rules take)."""
    import onnx
    model = onnx.load(path)
    params = set()
    for e in model.metadata_props:
        if e.key == "oasr.parameters":
            params = set(json.loads(e.value))
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:
        pass  # types stay unknown: nothing counts as folded
    g = model.graph
    opsets = {o.domain if o.domain != "ai.onnx" else "": o.version
              for o in model.opset_import}
    etype = {}
    for v in list(g.input) + list(g.output) + list(g.value_info):
        etype[v.name] = v.type.tensor_type.elem_type
    for t in g.initializer:
        etype[t.name] = t.data_type
    inits = {t.name for t in g.initializer}

    dynamic = {i.name for i in g.input if i.name not in inits} | params
    grad = set(params)
    counts = collections.OrderedDict()
    row = []
    for n in g.node:
        key = (n.domain if n.domain != "ai.onnx" else "", n.op_type)
        c = counts.setdefault(key, [0, 0, 0])
        c[0] += 1
        ins = [i for i in n.input if i]
        if n.op_type not in SHAPE_OPS and any(i in dynamic for i in ins):
            dynamic.update(n.output)
        elif all(etype.get(o) in INT_TYPES for o in n.output) and \
                (n.op_type in SHAPE_OPS or all(etype.get(i) in INT_TYPES for i in ins)):
            c[2] += 1
        if any(i in grad for i in ins):
            grad.update(o for o in n.output if etype.get(o) in FLOAT_TYPES)
        row.append(c)
    reaches = {g.output[0].name}
    for n in reversed(g.node):
        if any(o in reaches for o in n.output):
            reaches.update(i for i in n.input if etype.get(i) in FLOAT_TYPES)
    for n, c in zip(g.node, row):
        if any(o in grad and o in reaches for o in n.output):
            c[1] += 1
    # Nodes inside subgraphs (If, Loop) are counted, never folded.
    stack = [a.g for n in g.node for a in n.attribute if a.type == a.GRAPH]
    while stack:
        sub = stack.pop()
        for n in sub.node:
            key = (n.domain if n.domain != "ai.onnx" else "", n.op_type)
            counts.setdefault(key, [0, 0, 0])[0] += 1
            stack.extend(a.g for a in n.attribute if a.type == a.GRAPH)
    return [[d, op, opsets.get(d, 0)] + c for (d, op), c in counts.items()]


def _short(e, n):
    msg = " ".join(str(e).split()).split(" Please feel free")[0]
    return f"{type(e).__name__}: {msg[:n]}"


def _export(make, path, tmp, oasr_export, no_drop_path=False):
    import torch
    torch.manual_seed(0)
    model, x = make()
    if no_drop_path:
        for m in model.modules():
            if type(m).__name__ in ("StochasticDepth", "DropPath"):
                m.p = 0.0
    oasr_export(model, x, path, check=False, data_dir=os.path.join(tmp, "data"),
                quiet=True)
    return model, x


def cmd_export(a):
    import torch
    import torchvision
    import onnx
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from oasr import export as oasr_export
    from oasr._export import OPSET
    models = model_list()
    only = set(a.only.split(",")) if a.only else None
    old = {}
    if only and os.path.exists(a.output):
        old = {m["name"]: m for m in load_json(a.output)["models"]}
    out = []
    for name, (family, make) in models.items():
        if only and name not in only:
            if name in old:
                out.append(old[name])
            continue
        entry = {"name": name, "family": family}
        with tempfile.TemporaryDirectory(prefix="op-coverage-") as tmp:
            path = os.path.join(tmp, "m.onnx")
            try:
                try:
                    model, x = _export(make, path, tmp, oasr_export)
                except Exception as e:
                    # torch 1.13 cannot export stochastic depth's in-place
                    # bernoulli_: the graph without it, and a note.
                    if "Bernoulli" not in str(e):
                        raise
                    model, x = _export(make, path, tmp, oasr_export,
                                       no_drop_path=True)
                    entry["note"] = ("exported with stochastic depth off: "
                                     "with p > 0 the exporter fails on its "
                                     "in-place bernoulli_ (\"out parameter "
                                     "is not supported for bernoulli\")")
                entry["input"] = list(x.shape)
                entry["ops"] = inventory(path)
            except Exception as e:  # recorded in the table's notes
                entry["error"] = _short(e, 300)
        print(f"{name}: " + (entry.get("error") or f"{len(entry['ops'])} ops"),
              file=sys.stderr)
        out.append(entry)
    doc = {"generator": "scripts/op_coverage.py export",
           "torch": torch.__version__, "torchvision": torchvision.__version__,
           "onnx": onnx.__version__, "opset": OPSET,
           "ops_fields": ["domain", "op", "opset", "nodes", "active", "const_ints"],
           "models": out}
    with open(a.output, "w") as f:
        f.write(dump_json(doc))


def dump_json(doc):
    """JSON with one line per model field and per op (small diffs)."""
    head = {k: v for k, v in doc.items() if k != "models"}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "models": [')
    for i, m in enumerate(doc["models"]):
        fields = []
        for k, v in m.items():
            if k == "ops":
                ops = ",\n".join("   " + json.dumps(r) for r in v)
                fields.append(f'  "ops": [\n{ops}\n  ]')
            else:
                fields.append(f"  {json.dumps(k)}: {json.dumps(v)}")
        end = "," if i + 1 < len(doc["models"]) else ""
        lines.append(" {\n" + ",\n".join(fields) + "\n }" + end)
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

def load_json(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise CoverageError(f"{path}: cannot read the op inventory: {e.strerror}")
    except ValueError as e:
        raise CoverageError(f"{path}: not valid JSON: {e}")
    fields = ["domain", "op", "opset", "nodes", "active", "const_ints"]
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), list) or \
            doc.get("ops_fields") != fields:
        raise CoverageError(f"{path}: not an op inventory (expected an object "
                            f"with 'models' and ops_fields {fields}; write it "
                            f"with `op_coverage.py export`)")
    for m in doc["models"]:
        ok = isinstance(m, dict) and isinstance(m.get("name"), str) and (
            isinstance(m.get("error"), str) or isinstance(m.get("ops"), list))
        ok = ok and all(isinstance(r, list) and len(r) == 6 and
                        isinstance(r[0], str) and isinstance(r[1], str) and
                        all(isinstance(v, int) for v in r[2:])
                        for r in m.get("ops", []))
        if not ok:
            raise CoverageError(f"{path}: malformed model entry "
                                f"{json.dumps(m)[:120]}")
    return doc


OP_TABLE_HEADER = ["op", "since", "shape", "fold", "form", "grad", "cost",
                   "traits", "kernels", "precision"]


def load_op_table(path):
    """{(domain, op): [entry dicts by since]} from the '## ONNX ops' table of
    `oasr-translate --print-op-table`."""
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise CoverageError(f"{path}: cannot read the op table: {e.strerror}")
    try:
        start = lines.index("## ONNX ops")
    except ValueError:
        raise CoverageError(f"{path}: no '## ONNX ops' section: not the output "
                            f"of `oasr-translate --print-op-table`")
    rows = [l for l in lines[start + 1:] if l.strip()]
    cells = lambda l: [c.strip() for c in l.strip()[1:-1].split("|")]
    if len(rows) < 2 or cells(rows[0]) != OP_TABLE_HEADER:
        raise CoverageError(f"{path}: the ONNX ops table's header is not "
                            f"| {' | '.join(OP_TABLE_HEADER)} |")
    table = collections.defaultdict(list)
    for l in rows[2:]:
        if not l.startswith("|"):
            break
        c = cells(l)
        if len(c) != len(OP_TABLE_HEADER) or not c[1].isdigit():
            raise CoverageError(f"{path}: malformed op table row: {l}")
        e = dict(zip(OP_TABLE_HEADER, c))
        e["since"] = int(e["since"])
        domain, _, op = e["op"].rpartition("::")
        table[(domain, op)].append(e)
    if not table:
        raise CoverageError(f"{path}: the ONNX ops table has no rows")
    return table


def entry_at(table, domain, op, opset):
    """The registry entry that applies at `opset`: the largest since <= it."""
    fits = [e for e in table.get((domain, op), []) if e["since"] <= opset]
    return max(fits, key=lambda e: e["since"]) if fits else None


def cells_for(e, nodes, active, const_ints):
    """shape, grad, cpu, cuda cells and the gaps among them."""
    if e is None:
        return ["**not in registry**"] * 4, ["not in the registry"]
    kernels = e["kernels"]
    shape = "yes" if e["shape"] else "**no**"
    if not active:
        grad = "n/a"
    elif e["grad"]:
        grad = "yes"
    elif e["form"]:
        grad = "form"
    else:
        grad = "**no**"
    folds = e["fold"] and const_ints == nodes

    def kernel(backend):
        if folds:
            return "fold"
        if backend in kernels:
            return "yes"
        return "form" if e["form"] else "**no**"
    cpu, cuda = kernel("cpu"), kernel("cuda")
    gaps = [what for cell, what in [(shape, "no shape rule"),
                                    (grad, "no gradient rule"),
                                    (cpu, "no CPU kernel"),
                                    (cuda, "no CUDA kernel")]
            if cell.startswith("**")]
    return [shape, grad, cpu, cuda], gaps


def op_name(domain, op):
    return f"{domain}::{op}" if domain else op


def render(doc, table, json_label):
    models = doc["models"]
    exported = [m for m in models if "ops" in m]
    uses = collections.OrderedDict()  # (domain, op, opset) -> [counts, models]
    per_model = {}
    for m in exported:
        per_model[m["name"]] = []
        for d, op, opset, nodes, active, const_ints in m["ops"]:
            u = uses.setdefault((d, op, opset), [[0, 0, 0], []])
            u[0] = [u[0][0] + nodes, u[0][1] + active, u[0][2] + const_ints]
            u[1].append(m["name"])
            per_model[m["name"]].append((d, op, opset))
    rows, gaps = {}, {}
    for key, (c, names) in uses.items():
        e = entry_at(table, key[0], key[1], key[2])
        rows[key] = (e, *cells_for(e, *c))
        if rows[key][2]:
            gaps[key] = rows[key][2]

    out = []
    w = out.append
    w("<!-- Generated by `" + REGENERATE + "` from " + json_label +
      " and the op registry; do not edit. -->")
    w("# Op coverage of common training graphs\n")
    w("Every op the training graphs of these model families use, against "
      "oasr's op registry ([Ops.md](Ops.md)). The graphs are real exports "
      "(`scripts/op_coverage.py export`: oasr.export in training mode, the "
      f"TorchScript exporter at opset {doc.get('opset')}, torch "
      f"{doc.get('torch')}, torchvision {doc.get('torchvision')}, onnx "
      f"{doc.get('onnx')}); their op inventory is "
      "[op-coverage.json](op-coverage.json).\n")
    w("Each op is looked up at the opset the model imports it at (the "
      "registry entry with the largest *since* not above it). Cells:\n")
    w("- *grad*: `yes` a gradient rule; `form` the op trains as other ops "
      "(its training form, docs/passes.md) whose rules apply; `n/a` no node "
      "of it lies on a path from a trained parameter to the loss (integer "
      "results, masks, shape arithmetic), so autodiff needs no rule.")
    w("- *CPU*, *CUDA*: `yes` a kernel; `form` the training form's ops run "
      "instead; `fold` every node of it computes small integers from "
      "constants and shapes only and the registry folds it at import, so no "
      "kernel runs (the Shape, Gather, Unsqueeze, Concat chains of reshapes).")
    w("- **bold**: a gap.\n")
    w("Covered means the registry has the rules and kernels every op of a "
      "graph needs, not that the model's gradients were checked (scripts/"
      "model_zoo.py checks those against PyTorch for the families it "
      "holds).\n")
    w("## Models\n")
    w("| model | family | input | ops used | fully covered | gaps |")
    w("|---|---|---|---|---|---|")
    for m in models:
        shape = "x".join(str(d) for d in m.get("input", [])) or "?"
        if "ops" not in m:
            w(f"| {m['name']} | {m.get('family', '')} | {shape} | export "
              f"fails (notes) | | |")
            continue
        keys = per_model[m["name"]]
        missing = [op_name(k[0], k[1]) for k in keys if k in gaps]
        w(f"| {m['name']} | {m.get('family', '')} | {shape} | {len(keys)} | "
          f"{len(keys) - len(missing)} | {', '.join(sorted(set(missing)))} |")
    w("")
    w("## Ops\n")
    w("| op | opset | entry since | shape | grad | CPU | CUDA | nodes (on the "
      "gradient path, folded) | models |")
    w("|---|---|---|---|---|---|---|---|---|")
    all_names = [m["name"] for m in exported]
    for key in sorted(uses, key=lambda k: (k[0], k[1], k[2])):
        (c, names), (e, cells, _) = uses[key], rows[key]
        since = str(e["since"]) if e else "—"
        w(f"| {op_name(key[0], key[1])} | {key[2]} | {since} | " +
          " | ".join(cells) + f" | {c[0]} ({c[1]}, {c[2]}) | "
          f"{_who(names, all_names)} |")
    w("")
    w("## Gaps\n")
    w("Every unfilled cell of the table above (what the registry lacks for "
      "these graphs to train on both backends).\n")
    if not gaps:
        w("None: every cell is filled.")
    for key in sorted(gaps):
        w(f"- `{op_name(key[0], key[1])}` (opset {key[2]}): "
          f"{', '.join(gaps[key])}; used by {', '.join(uses[key][1])}")
    w("")
    w("## Export notes\n")
    notes = [m for m in models if "error" in m or m.get("note")]
    if not notes:
        w("Every model exported as it is.")
    for m in notes:
        if "error" in m:
            w(f"- {m['name']}: the export fails under torch {doc.get('torch')} "
              f"({m['error']}), so its ops are not counted.")
        else:
            w(f"- {m['name']}: {m['note']}.")
    return "\n".join(out) + "\n"


def _who(names, all_names):
    """The models using an op: the list, or those of all that do not."""
    if len(names) * 2 <= len(all_names):
        return ", ".join(names)
    rest = [n for n in all_names if n not in names]
    return "all" if not rest else "all but " + ", ".join(rest)


def cmd_table(a):
    doc = load_json(a.json)
    if a.op_table:
        table = load_op_table(a.op_table)
    else:
        with tempfile.TemporaryDirectory(prefix="op-coverage-") as tmp:
            path = os.path.join(tmp, "Ops.md")
            try:
                p = subprocess.run([a.translate, "--print-op-table", "-o", path],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
            except OSError as e:
                raise CoverageError(f"{a.translate}: cannot run: {e.strerror}")
            if p.returncode != 0:
                raise CoverageError(f"{a.translate} --print-op-table failed "
                                    f"(exit {p.returncode}): {p.stdout.strip()}")
            table = load_op_table(path)
    where = os.path.abspath(a.json)
    label = os.path.relpath(where, ROOT) if where.startswith(ROOT + os.sep) \
        else os.path.basename(where)
    text = render(doc, table, label)
    if a.check:
        try:
            with open(a.check) as f:
                committed = f.read()
        except OSError as e:
            raise CoverageError(f"{a.check}: cannot read: {e.strerror}")
        if committed != text:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(
                committed.splitlines(True), text.splitlines(True),
                a.check, "regenerated"))
            sys.stdout.flush()
            raise CoverageError(f"{a.check} is not what the op registry and "
                                f"{label} give now; regenerate it with "
                                f"`{REGENERATE}`")
    elif a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="export the models, write the inventory")
    e.add_argument("-o", "--output", default=JSON_PATH)
    e.add_argument("--only", help="comma-separated model names to re-export "
                   "(the others are kept from the existing file)")
    t = sub.add_parser("table", help="write the coverage page")
    t.add_argument("--json", default=JSON_PATH)
    src = t.add_mutually_exclusive_group()
    src.add_argument("--op-table", help="output of oasr-translate --print-op-table")
    src.add_argument("--translate", default=os.path.join(ROOT, "build", "bin",
                                                         "oasr-translate"))
    t.add_argument("-o", "--output", default=PAGE_PATH, help="'-' for stdout")
    t.add_argument("--check", metavar="PAGE", help="write nothing; fail with "
                   "a diff unless PAGE is what would be written")
    a = p.parse_args()
    try:
        cmd_export(a) if a.cmd == "export" else cmd_table(a)
    except CoverageError as err:
        print(f"op_coverage.py: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
