"""What the bench/run_*.py scripts share: a results path that is never
overwritten, and the torchvision models exported for oasr-run."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def new_results(parser, name):
    """bench/results/NAME without its extension; a parser error when
    NAME.json or NAME.md exists (results are never overwritten)."""
    out = os.path.join(ROOT, "bench", "results", name)
    if os.path.exists(out + ".json") or os.path.exists(out + ".md"):
        parser.error(f"bench/results/{name}.json exists: results are never overwritten; "
                     "pass another --name")
    return out


def exported_models(build, models):
    """BUILD/bench-models/M.onnx for each of `models` (a comma-separated
    list), exported by scripts/export_models.py where missing: for training,
    by the TorchScript exporter of Debian's torch (PyTorch 2.x's default
    dynamo exporter folds BatchNormalization away, which oasr-run refuses as
    an inference graph)."""
    d = os.path.join(build, "bench-models")
    os.makedirs(d, exist_ok=True)
    paths = [os.path.join(d, m + ".onnx") for m in models.split(",")]
    if not all(os.path.exists(p) for p in paths):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "export_models.py"),
                        d, "--models", models], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return paths
