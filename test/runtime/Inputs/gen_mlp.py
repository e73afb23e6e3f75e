#!/usr/bin/env python3
"""Writes a planned MLP training step (docs/IR.md section 3) for runtime tests.

    gen_mlp.py --batch 16 --in 64 --hidden 32 --classes 10 \
        --groups wfbp|single|reversed [--optimizer sgd|momentum] [--lr 0.1]
        [--no-layout] [--forward-only] [--source model.onnx]
        [--grad-dtype f32|bf16|f16]

`wfbp`: one fused group per layer, started as soon as the layer's gradients
are ready; `single`: one group after backward; `reversed`: the fc1 group
waited first. All describe the same math, so training must give the same
weights whatever the grouping.
"""
import argparse

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=16)
p.add_argument("--in", dest="inp", type=int, default=64)
p.add_argument("--hidden", type=int, default=32)
p.add_argument("--classes", type=int, default=10)
p.add_argument("--groups", default="wfbp")
p.add_argument("--optimizer", default="sgd")
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--no-layout", action="store_true")
p.add_argument("--forward-only", action="store_true")
p.add_argument("--source", default="")
p.add_argument("--predicted-us", type=float, default=0.0)
p.add_argument("--grad-dtype", default="f32", choices=["f32", "bf16", "f16"])
a = p.parse_args()

N, I, H, C = a.batch, a.inp, a.hidden, a.classes
T = lambda *s: "tensor<" + "x".join(str(d) for d in s) + "xf32>"
x, w1, b1, w2, b2 = T(N, I), T(H, I), T(H), T(C, H), T(C)
h, y = T(N, H), T(N, C)
attrs = ['oasr.model = "mlp"']
if a.source:
    attrs.append(f'oasr.source = "{a.source}"')
if not a.forward_only:
    attrs.append(f'oasr.plan = {{strategy = "{a.groups}", groups = '
                 f'{1 if a.groups == "single" else 2} : i64, '
                 f'predicted_iteration_us = {a.predicted_us or 100.0} : f64}}')
print(f"module attributes {{{', '.join(attrs)}}} {{")

if a.forward_only:
    print(f'''  func.func @forward(%x: {x} {{oasr.input = "input"}}, %w1: {w1} {{oasr.param = "fc1.weight"}}, %b1: {b1} {{oasr.param = "fc1.bias"}}, %w2: {w2} {{oasr.param = "fc2.weight"}}, %b2: {b2} {{oasr.param = "fc2.bias"}}) -> {y} {{
    %h = oasr.node "Gemm"(%x, %w1, %b1) {{transB = 1 : i64}} : ({x}, {w1}, {b1}) -> {h} loc("/fc1/Gemm")
    %r = oasr.node "Relu"(%h) : ({h}) -> {h} loc("/relu/Relu")
    %y = oasr.node "Gemm"(%r, %w2, %b2) {{transB = 1 : i64}} : ({h}, {w2}, {b2}) -> {y} loc("/fc2/Gemm")
    return %y : {y}
  }}
}}''')
    raise SystemExit

mom = a.optimizer == "momentum"
args = [f'%x: {x} {{oasr.input = "input"}}',
        f'%label: tensor<{N}xi64> {{oasr.label = "label"}}',
        f'%w1: {w1} {{oasr.param = "fc1.weight"}}', f'%b1: {b1} {{oasr.param = "fc1.bias"}}',
        f'%w2: {w2} {{oasr.param = "fc2.weight"}}', f'%b2: {b2} {{oasr.param = "fc2.bias"}}']
if mom:
    args += [f'%v{n}: {t} {{oasr.opt_state = "{nm}"}}' for n, t, nm in
             [("w1", w1, "fc1.weight"), ("b1", b1, "fc1.bias"), ("w2", w2, "fc2.weight"), ("b2", b2, "fc2.bias")]]


def al(n):
    return (n + 63) // 64 * 64


def start(tok, grads, types, group):
    sizes = {"dw1": H * I * 4, "db1": H * 4, "dw2": C * H * 4, "db2": C * 4}
    offs, end = [], 0
    for g in grads:
        end = al(end)
        offs.append(end)
        end += sizes[g]
    lay = "" if a.no_layout else f", offsets = array<i64: {', '.join(map(str, offs))}>, buffer_bytes = {end} : i64"
    gl = ", ".join("%" + g for g in grads)
    wire = "" if a.grad_dtype == "f32" else f", wire_type = {a.grad_dtype}"
    return f"    %{tok} = oasr.allreduce_start {gl} {{group = {group} : i64{lay}{wire}}} : {', '.join(types)}"


def update(p, g, t):
    if mom:
        return (f'    %n{p}, %nv{p} = oasr.optimizer_update "momentum" %{p}, %{g}, %v{p} '
                f'{{lr = {a.lr} : f64, momentum = 9.0e-01 : f64}} : {t}, {t}')
    return f'    %n{p} = oasr.optimizer_update "sgd" %{p}, %{g} {{lr = {a.lr} : f64}} : {t}'


res_types = ["tensor<f32>", w1, b1, w2, b2] + ([w1, b1, w2, b2] if mom else [])
res_attrs = ['{oasr.output = "loss"}'] + [f'{{oasr.new_param = "{n}"}}' for n in
                                        ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]]
if mom:
    res_attrs += [f'{{oasr.new_opt_state = "{n}"}}' for n in ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]]
print(f"  func.func @train_step({', '.join(args)})")
print(f"      -> ({', '.join(t + ' ' + r for t, r in zip(res_types, res_attrs))}) {{")
print(f'''    %h = oasr.node "Gemm"(%x, %w1, %b1) {{transB = 1 : i64}} : ({x}, {w1}, {b1}) -> {h} loc("/fc1/Gemm")
    %r = oasr.node "Relu"(%h) : ({h}) -> {h} loc("/relu/Relu")
    %y = oasr.node "Gemm"(%r, %w2, %b2) {{transB = 1 : i64}} : ({h}, {w2}, {b2}) -> {y} loc("/fc2/Gemm")
    %loss, %logp = oasr.node "SoftmaxCrossEntropyLoss"(%y, %label) {{reduction = "mean"}} : ({y}, tensor<{N}xi64>) -> (tensor<f32>, {y}) loc("/loss")
    %one = oasr.node "Constant"() {{value = dense<1.0> : tensor<f32>}} : () -> tensor<f32> loc("/loss/one")
    %dy = oasr.node "SoftmaxCrossEntropyLossGrad"(%one, %logp, %label) {{reduction = "mean", oasr.layer = "/loss"}} : (tensor<f32>, {y}, tensor<{N}xi64>) -> {y} loc("/loss/grad")
    %dr, %dw2, %db2 = oasr.node "GemmGrad"(%dy, %r, %w2) {{transB = 1 : i64, oasr.layer = "/fc2/Gemm"}} : ({y}, {h}, {w2}) -> ({h}, {w2}, {b2}) loc("/fc2/Gemm/grad")''')
if a.groups in ("wfbp", "reversed"):
    print(start("t0", ["dw2", "db2"], [w2, b2], 0))
print(f'''    %dh = oasr.node "ReluGrad"(%dr, %r) {{oasr.layer = "/relu/Relu"}} : ({h}, {h}) -> {h} loc("/relu/Relu/grad")
    %dx, %dw1, %db1 = oasr.node "GemmGrad"(%dh, %x, %w1) {{transB = 1 : i64, oasr.layer = "/fc1/Gemm"}} : ({h}, {x}, {w1}) -> ({x}, {w1}, {b1}) loc("/fc1/Gemm/grad")''')
if a.groups in ("wfbp", "reversed"):
    print(start("t1", ["dw1", "db1"], [w1, b1], 1))
    w0 = f"    %rw2, %rb2 = oasr.allreduce_wait %t0 : {w2}, {b2}"
    w1_ = f"    %rw1, %rb1 = oasr.allreduce_wait %t1 : {w1}, {b1}"
    u2 = [update("w2", "rw2", w2), update("b2", "rb2", b2)]
    u1 = [update("w1", "rw1", w1), update("b1", "rb1", b1)]
    seq = [w0] + u2 + [w1_] + u1 if a.groups == "wfbp" else [w0, w1_] + u1 + u2
    print("\n".join(seq))
else:
    print(start("t0", ["dw2", "db2", "dw1", "db1"], [w2, b2, w1, b1], 0))
    print(f"    %rw2, %rb2, %rw1, %rb1 = oasr.allreduce_wait %t0 : {w2}, {b2}, {w1}, {b1}")
    print("\n".join([update("w2", "rw2", w2), update("b2", "rb2", b2), update("w1", "rw1", w1), update("b1", "rb1", b1)]))
rets = ["%loss", "%nw1", "%nb1", "%nw2", "%nb2"] + (["%nvw1", "%nvb1", "%nvw2", "%nvb2"] if mom else [])
print(f"    return {', '.join(rets)} : {', '.join(res_types)}")
print("  }\n}")
