#!/usr/bin/env python3
"""Writes a text (.txtpb) or JSON ModelProto as a binary .onnx file, for the
lit tests of the binary loader. Usage: to_binary.py IN OUT."""

import sys

import onnx
from google.protobuf import json_format, text_format

src, dst = sys.argv[1], sys.argv[2]
model = onnx.ModelProto()
with open(src) as f:
    if src.endswith(".json"):
        json_format.Parse(f.read(), model)
    else:
        text_format.Parse(f.read(), model)
with open(dst, "wb") as f:
    f.write(model.SerializeToString())
