#!/usr/bin/python3
"""set_node_attr.py IN.onnx OUT.onnx OP_TYPE NAME VALUE...

Sets attribute NAME on every OP_TYPE node of IN.onnx and writes OUT.onnx:
one VALUE that parses as an int or a float gives that scalar, otherwise
the VALUEs are a list of strings. For tests that need a model exported
from PyTorch with an attribute PyTorch never sets."""
import sys

import onnx
from onnx import helper


def parse(values):
    if len(values) == 1:
        for kind in (int, float):
            try:
                return kind(values[0])
            except ValueError:
                pass
    return [v.encode() for v in values]


def main():
    src, dst, op, name, *values = sys.argv[1:]
    model = onnx.load(src)
    nodes = [n for n in model.graph.node if n.op_type == op]
    if not nodes:
        sys.exit(f"no {op} node in {src}")
    for n in nodes:
        kept = [a for a in n.attribute if a.name != name]
        del n.attribute[:]
        n.attribute.extend(kept + [helper.make_attribute(name, parse(values))])
    onnx.save(model, dst)


if __name__ == "__main__":
    main()
