#!/usr/bin/env python3
"""strict_json.py FILE...: each FILE parses as strict JSON (no bare NaN,
Infinity or -Infinity, which Python's json module would otherwise accept);
prints how many non-finite numbers each carries as the strings "NaN",
"Infinity" and "-Infinity". Exits 1 on the first file that is not JSON."""
import json
import sys


def refuse(word):
    raise ValueError(f"bare {word} is not JSON")


def count(v, seen):
    if isinstance(v, str) and v in seen:
        seen[v] += 1
    elif isinstance(v, list):
        for x in v:
            count(x, seen)
    elif isinstance(v, dict):
        for x in v.values():
            count(x, seen)


for path in sys.argv[1:]:
    try:
        doc = json.load(open(path), parse_constant=refuse)
    except ValueError as e:
        sys.exit(f"{path}: not JSON: {e}")
    seen = {"NaN": 0, "Infinity": 0, "-Infinity": 0}
    count(doc, seen)
    print(f"{path.rsplit('/', 1)[-1]}: JSON; non-finite: " +
          ", ".join(f"{k} {n}" for k, n in seen.items()))
