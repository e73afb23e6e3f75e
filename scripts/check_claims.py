#!/usr/bin/env python3
"""Check that every measured number in the docs comes from a committed result.

Scans README.md and docs/*.md (not docs/generated/) for numeric claims and
checks each against the file under bench/results/ that the text links to.

What is a claim: a number followed by a unit, `ms` or `s` (a time), `x` or
`×` (a ratio) or `%` (a percentage), as in `2085.8 ms`, `1.22x`, `+1.0 %`.
A chain of numbers joined by `-`, `..`, `/`, `to`, `and`, `or`, `against`
or `vs` before the unit is one claim per number (`-4.7 to +1.9 %`,
`834 against 556 ms`). Text in code spans and fenced code blocks, link
targets and HTML comments is not read. Microseconds, bytes and rates are not
claims here.

Where a claim belongs: to its block, which is a paragraph, a list item, a
heading or a table row. A block cites the results files that its markdown
links point to (`[name](bench/results/NAME.md)`, resolved from the document's
folder like any relative link). A table row that links to no results file
takes the links of the paragraphs right before and right after its table
(its caption). A claim traces to any of the files its block cites.

Rule 1, a cited claim: the number, rounded to the precision it is written
with, must equal a number of one of the cited files rounded the same way
(signs ignored; a time may be in s, ms or µs in the file, a percentage a
fraction). A ratio may also be the quotient of two numbers of one record
of a file (a line; in JSON, one object's or array's own values), or of two
numbers written on the claim's own line that are themselves in the file
(`1.24x (1088.3 against 1354.9 ms)`). A percentage may likewise be a
share (100 a / b) or a difference (100 (a / b - 1)) of two such numbers.

Rule 2, an uncited claim: a block that links to no results file may not
hold a claim on a line that reads as a performance comparison, that is a
line with one of the words faster, slower, step(s), speed-up, over, vs,
against, than, DDP, PyTorch (a table row: in the row or its table's
header row).

Rule 3, the headline: README.md's opening (its text before the first
`## ` heading) leads with the headline numbers, and bench/results/README.md
indexes them in its "## Headline numbers" table. Each claim of the opening
must also be in a row of that table that links to the same results file.

Rule 4, the index: bench/results/README.md links to every results file,
that is every .md file under bench/results/ (archive/ and any other folder
included) but itself; one it does not link to fails, and so does a link
of it to a results file that does not exist. Rules 3 and 4 run when
README.md is among the files checked, as it is by default.

A line holding the comment `<!-- claim: design -->` is exempt from the
rules: its numbers are design parameters or quoted from elsewhere, not
measurements (a model's size, a configured timeout). A link to a results
file that does not exist is a failure too.

Exit status: 0 when every claim is traced, 1 listing each failure as
`FILE:LINE: claim '...' not found in bench/results/X`,
`FILE:LINE: claim '...' cites no results file` or
`bench/results/README.md: X is not indexed`, 2 on a usage error.
"""

import argparse
import bisect
import glob
import json
import os
import re
import sys

DESIGN_MARK = "<!-- claim: design -->"
PERF_WORDS = re.compile(r"\b(faster|slower|steps?|speed-?ups?|over|vs\.?|"
                        r"against|than|DDP|PyTorch)\b", re.I)

_NUM = r"[-+\u2212]?\d+(?:\.\d+)?"
_SEP = r"\s*(?:-|\u2013|\.\.|/|\bto\b|\band\b|\bor\b|\bagainst\b|\bvs\.?)\s*"
# A number not glued to a word before it (b8, x86_64, resnet18-2x...).
CLAIM = re.compile(
    rf"(?<![\w.])(?<!\w-)({_NUM}(?:{_SEP}{_NUM})*)\s?(ms|s|%|x|\u00d7)(?!\w)")
NUM = re.compile(_NUM)
NUMBER = re.compile(rf"(?<![\w.])(?<!\w-){_NUM}")
FILE_NUM = re.compile(r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+).+?\1")
COMMENT = re.compile(r"<!--.*?-->")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
LIST_ITEM = re.compile(r"^\s*(?:[*+-]|\d+[.)])\s+")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")


class Claim:
    """One number of a claim: `value` as written (no sign), `decimals` shown,
    `kind` time, ratio or percent, `scale` ms per unit (1000 for s)."""

    def __init__(self, line, text, value, decimals, kind, scale):
        self.line, self.text = line, text
        self.value, self.decimals, self.kind = value, decimals, kind
        self.scale = scale


def readable(text):
    """A line of markdown without code spans, HTML comments, link targets."""
    text = COMMENT.sub(" ", text)
    text = CODE_SPAN.sub(" ", text)
    return LINK_TARGET.sub("]", text)


def _decimals(number):
    return len(number.split(".")[1]) if "." in number else 0


def claims_in(text, line):
    """Claims on one readable() line."""
    found = []
    for m in CLAIM.finditer(text):
        unit = m.group(2)
        kind = {"ms": "time", "s": "time", "%": "percent"}.get(unit, "ratio")
        gap = " " if m.group(0)[len(m.group(1))].isspace() else ""
        chain = m.group(1)
        for n in NUM.finditer(chain):
            shown = n.group(0)
            if n.start() > 0 and chain[n.start() - 1].isdigit():
                shown = shown[1:]  # 1.17-1.21x: a range, not a sign
            s = shown.replace("\u2212", "-").lstrip("+-")
            found.append(Claim(line, shown + gap + unit, float(s),
                               _decimals(s), kind,
                               1000.0 if unit == "s" else 1.0))
    return found


class Block:
    def __init__(self, kind):
        self.kind = kind      # "para", "row", "head"
        self.lines = []       # (line number, text)
        self.table = None     # the table (list of row blocks) of a row

    def text(self):
        return "\n".join(t for _, t in self.lines)


def blocks_of(lines):
    """Splits markdown into blocks; fenced code is left out."""
    blocks, cur, table, fence = [], None, None, None
    for i, raw in enumerate(lines, 1):
        s = raw.strip()
        if fence:
            if s.startswith(fence):
                fence = None
            continue
        if s.startswith("```") or s.startswith("~~~"):
            fence, cur, table = s[:3], None, None
            continue
        if not s:
            cur, table = None, None
            continue
        if s.startswith("|"):
            if TABLE_RULE.match(s):
                continue
            if table is None:
                table = []
            b = Block("row")
            b.lines.append((i, raw))
            b.table = table
            table.append(b)
            blocks.append(b)
            cur = None
            continue
        table = None
        if s.startswith("#"):
            b = Block("head")
            b.lines.append((i, raw))
            blocks.append(b)
            cur = None
            continue
        if cur is None or LIST_ITEM.match(raw):
            cur = Block("para")
            blocks.append(cur)
        cur.lines.append((i, raw))
    return blocks


class ResultsFile:
    """The numbers of one results file: all of them (sorted, signs dropped),
    and grouped by record (a line of text, or a JSON object's or array's
    own values) for the quotients a ratio may be."""

    def __init__(self, path):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        self.values = _sorted_numbers(text)
        self.records = None
        if path.endswith(".json"):
            try:
                self.records = []
                self._walk(json.loads(text))
            except ValueError:
                self.records = None
        if self.records is None:
            self.records = [_sorted_numbers(ln) for ln in text.split("\n")]
        self.records = [r for r in self.records if len(r) > 1]

    def _walk(self, node):
        kids = node.values() if isinstance(node, dict) else node
        own = []
        for k in kids:
            if isinstance(k, (dict, list)):
                self._walk(k)
            elif isinstance(k, str):
                own += _sorted_numbers(k)
            elif isinstance(k, (int, float)) and not isinstance(k, bool):
                own.append(abs(float(k)))
        self.records.append(sorted(own))


def _sorted_numbers(text):
    return sorted({float(m.group(0)) for m in FILE_NUM.finditer(text)})


def _has(sorted_vals, lo, hi):
    i = bisect.bisect_left(sorted_vals, lo)
    return i < len(sorted_vals) and sorted_vals[i] <= hi


def _half(decimals):
    """Half a unit of the last digit shown: the rounding a number allows."""
    return 0.5 * 10.0 ** -decimals * (1 + 1e-9) + 1e-12


def _quotient_in(c, half, vals):
    return any(b > 0 and _has(vals, (c - half) * b, (c + half) * b)
               for b in vals)


def traced(claim, files, line_numbers=()):
    """Whether `claim` rounds to a number of one of `files`; for a ratio or
    a percentage also to the quotient of two numbers of one record of a
    file, or of two numbers written on its own line that are in a file
    (line_numbers: (value, decimals) pairs)."""
    half = _half(claim.decimals)
    c = claim.value
    if claim.kind == "time":
        # The file's number in s, ms or µs, brought to the claim's unit.
        scales = [f / claim.scale for f in (1.0, 1e3, 1e-3)]
    elif claim.kind == "percent":
        scales = [1.0, 100.0]
    else:
        scales = [1.0]
    for rf in files:
        for k in scales:
            # v * k rounds to c  <=>  v in [(c - half) / k, (c + half) / k]
            if _has(rf.values, (c - half) / k, (c + half) / k):
                return True
    if claim.kind == "ratio":
        quotients = [(c, half)]
    elif claim.kind == "percent":
        # a share (a / b) or a difference (a / b - 1), in per cent
        quotients = [(q, half / 100) for q in
                     (c / 100, 1 + c / 100, 1 - c / 100)]
    else:
        return False
    shown = sorted(v for v, d in line_numbers
                   if any(_has(rf.values, v - _half(d), v + _half(d))
                          for rf in files))
    return any(_quotient_in(q, h, r) for q, h in quotients
               for r in [shown] + [r for rf in files for r in rf.records])


def cited_files(block, doc_dir, root):
    """The bench/results/ files a block links to: [(shown name, path or
    None when the link points to a file that does not exist)]."""
    results = os.path.join(root, "bench", "results") + os.sep
    out = []
    for m in LINK.finditer(block.text()):
        target = m.group(1).split("#")[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        path = os.path.normpath(os.path.join(doc_dir, target))
        if not path.startswith(results):
            continue
        shown = os.path.relpath(path, root).replace(os.sep, "/")
        out.append((shown, path if os.path.isfile(path) else None))
    return out


def check_doc(path, root, results, report):
    """Checks one markdown file, calling report() with each failure;
    returns the number of claims it holds."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    shown_doc = os.path.relpath(path, root).replace(os.sep, "/")
    if shown_doc.startswith(".."):
        shown_doc = path
    blocks = blocks_of(lines)
    cites = {id(b): cited_files(b, os.path.dirname(path), root)
             for b in blocks}
    # A table's caption: the paragraphs right before and right after it.
    for k, b in enumerate(blocks):
        if b.kind == "row" and not cites[id(b)]:
            first = blocks.index(b.table[0])
            last = blocks.index(b.table[-1], k)
            for j in (first - 1, last + 1):
                if 0 <= j < len(blocks) and blocks[j].kind == "para":
                    cites[id(b)] = cites[id(b)] + cites[id(blocks[j])]
    nclaims = 0
    for b in blocks:
        files = cites[id(b)]
        for shown in sorted({s for s, p in files if p is None}):
            name = shown.rsplit("/", 1)[1]
            n = next((n for n, t in b.lines if name in t), b.lines[0][0])
            report(f"{shown_doc}:{n}: link to {shown}: no such file")
        present = list(dict.fromkeys(p for _, p in files if p is not None))
        names = ", ".join(os.path.relpath(p, root).replace(os.sep, "/")
                          for p in present)
        # A table row compares what its table's header says it compares.
        context = readable(b.table[0].lines[0][1]) + " " if b.table else ""
        for n, text in b.lines:
            if DESIGN_MARK in text:
                continue
            text = readable(text)
            for c in claims_in(text, n):
                nclaims += 1
                if present:
                    numbers = [(float(m.group(0).lstrip("+-\u2212")),
                                _decimals(m.group(0)))
                               for m in NUMBER.finditer(text)]
                    if not traced(c, [results(p) for p in present], numbers):
                        report(f"{shown_doc}:{n}: claim '{c.text}' not found "
                               f"in {names}")
                elif not files and PERF_WORDS.search(context + text):
                    report(f"{shown_doc}:{n}: claim '{c.text}' cites no "
                           "results file")
    return nclaims


def check_headline(root, report):
    """Rule 3: README.md's opening against bench/results/README.md's
    headline table; returns the number of claims checked (0 when either
    is missing)."""
    readme = os.path.join(root, "README.md")
    index = os.path.join(root, "bench", "results", "README.md")
    if not (os.path.isfile(readme) and os.path.isfile(index)):
        return 0
    with open(index, encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next((i for i, l in enumerate(lines)
                  if l.strip().lower() == "## headline numbers"), None)
    if start is None:
        return 0
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("## ")), len(lines))
    rows = []  # (files it links to, its claims)
    for b in blocks_of(lines[:end]):
        if b.kind != "row" or b.lines[0][0] <= start:
            continue
        files = {p for _, p in cited_files(b, os.path.dirname(index), root)}
        rows.append((files, claims_in(readable(b.text()), 0)))
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    end = next((i for i, l in enumerate(lines) if l.startswith("## ")),
               len(lines))
    checked = 0
    results = os.path.join(root, "bench", "results") + os.sep
    for b in blocks_of(lines[:end]):
        # Each claim's file: the first results link after it in its block
        # (README writes "1.22x ([name](file))").
        links = []  # ((line, column), path)
        for n, text in b.lines:
            for m in LINK.finditer(text):
                path = os.path.normpath(os.path.join(
                    root, m.group(1).split("#")[0]))
                if path.startswith(results):
                    links.append(((n, m.start()), path))
        for n, text in b.lines:
            if DESIGN_MARK in text:
                continue
            at = 0
            for c in claims_in(readable(text), n):
                checked += 1
                col = text.find(c.text, at)
                at = max(at, col)
                after = [p for pos, p in links if pos >= (n, col)]
                cited = after[:1] or [p for _, p in links][-1:]
                half = _half(c.decimals)
                ok = any(files_row & set(cited) and any(
                    r.kind == c.kind and abs(r.value - c.value) <= half
                    for r in claims) for files_row, claims in rows)
                if not ok:
                    report(f"README.md:{n}: headline claim '{c.text}' is in "
                           "no row of bench/results/README.md's headline "
                           "table that links to the same file")
    return checked


def check_index(root, report):
    """Rule 4: bench/results/README.md links to every results file under
    bench/results/ (folders included) and to none that is missing; returns
    the number of results files (0 when there is no index)."""
    results = os.path.join(root, "bench", "results")
    index = os.path.join(results, "README.md")
    if not os.path.isfile(index):
        return 0
    with open(index, encoding="utf-8") as f:
        text = f.read()
    shown_index = "bench/results/README.md"
    linked = set()
    for m in LINK.finditer(text):
        target = m.group(1).split("#")[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        path = os.path.normpath(os.path.join(results, target))
        if not path.startswith(results + os.sep):
            continue
        if os.path.isfile(path):
            linked.add(path)
        else:
            n = text.count("\n", 0, m.start()) + 1
            shown = os.path.relpath(path, root).replace(os.sep, "/")
            report(f"{shown_index}:{n}: link to {shown}: no such file")
    files = []
    for folder, _, names in os.walk(results):
        files += [os.path.join(folder, n) for n in names if n.endswith(".md")]
    files = sorted((os.path.relpath(p, results).replace(os.sep, "/"), p)
                   for p in files if p != index)
    for shown, path in files:
        if path not in linked:
            report(f"{shown_index}: {shown} is not indexed")
    return len(files)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Checks that the measured numbers in README.md and "
        "docs/*.md are found in the bench/results/ files they link to.",
        epilog="""\
rules, in short (the script's docstring has them whole):
  A time (ms, s), ratio (x, \u00d7) or percentage in a paragraph, list item
  or table row that links to a file under bench/results/ must appear in
  that file at the precision written; a ratio or percentage may also be
  the quotient of two numbers of one line of the file, or of two numbers
  of its own line that are found in the file.
  One in a block without such a link may not stand on a line that
  compares performance (faster, slower, step, speed-up, over, vs,
  against, than, DDP, PyTorch).
  README.md's opening numbers must be in bench/results/README.md's
  headline table, and that index must link to every results file.
  A line of design numbers, not measurements, is marked with
    <!-- claim: design -->
exit status: 0 all traced; 1 failures listed; 2 usage error""")
    ap.add_argument("files", nargs="*", metavar="FILE",
                    help="markdown files to check (default: README.md and "
                    "docs/*.md under --root)")
    ap.add_argument("--root", default=os.path.dirname(here),
                    help="the repository root, which holds bench/results/ "
                    "(default: this script's repository)")
    ap.add_argument("-q", "--quiet", action="store_true",
                    help="print only the failures, no summary line")
    args = ap.parse_args(argv)

    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, "bench", "results")):
        ap.error(f"no bench/results/ folder under --root {args.root}")
    files = args.files or \
        [os.path.join(root, "README.md")] + \
        sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    for f in files:
        if not os.path.isfile(f):
            ap.error(f"no such file: {f}")

    failures = []
    cache = {}

    def results(path):
        if path not in cache:
            cache[path] = ResultsFile(path)
        return cache[path]

    total = sum(check_doc(os.path.abspath(f), root, results, failures.append)
                for f in files)
    if os.path.join(root, "README.md") in [os.path.abspath(f) for f in files]:
        check_headline(root, failures.append)
        check_index(root, failures.append)
    for line in failures:
        print(line)
    if not args.quiet:
        print(f"check_claims: {total} claims in {len(files)} files, "
              f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
