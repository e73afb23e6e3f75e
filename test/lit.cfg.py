# -*- Python -*-
# lit configuration for oasr: FileCheck suites mirroring the source tree.

import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "OASR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
# OASR_LIT_EXEC_ROOT: another place for the tests' outputs, so that two lit
# runs of the same tests can go side by side (bench/run_fault_soak.sh).
config.test_exec_root = os.environ.get("OASR_LIT_EXEC_ROOT") or \
    os.path.join(config.oasr_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.oasr_tools_dir, append_path=True)
# Open MPI refuses to run as root unless told; CI runs as root.
llvm_config.with_environment("OMPI_ALLOW_RUN_AS_ROOT", "1")
llvm_config.with_environment("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

# scripts/check.sh's ISA-capped pass caps oneDNN (and with it oasr's own
# vector loops, runtime/cpu/VectorSums.h) below the machine's ISA for every
# test, PyTorch's references included.
for var in ["ONEDNN_MAX_CPU_ISA"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]

# Ahead of lit's own %python (the interpreter running lit): tests need
# Debian's python with onnx/torch.
config.substitutions.insert(0, ("%python", config.oasr_python))
config.substitutions.append(("%oasr_src", config.oasr_src_root))
config.substitutions.append(("%oasr_obj", config.oasr_obj_root))
config.substitutions.append(("%mpirun", config.mpiexec + " --oversubscribe"))
# flatc: ONNX Runtime checkpoints written from JSON, read back as JSON
# (lib/Import/ORTCheckpoint.fbs).
config.substitutions.append(("%flatc", config.oasr_flatc))

tools = ["oasr-opt", "oasr-translate", "oasr-plan", "oasr-run", "oasr-bench"]
llvm_config.add_tool_substitutions(
    [ToolSubst(t, unresolved="ignore") for t in tools],
    [config.oasr_tools_dir])

for t in tools:
    if os.path.exists(os.path.join(config.oasr_tools_dir, t)):
        config.available_features.add(t)
if config.oasr_enable_cuda:
    config.available_features.add("cuda")
    # GPUs this oasr-run can use here: cuda-device with one, cuda-devices-2
    # with two or more (NCCL tests run one rank per GPU).
    _run = os.path.join(config.oasr_tools_dir, "oasr-run")
    if os.path.exists(_run):
        import subprocess
        try:
            _out = subprocess.run([_run, "--list-devices"], capture_output=True,
                                  text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            _out = ""
        _gpus = sum(1 for l in _out.splitlines() if l.startswith("cuda:") and
                    l.split(":")[1].isdigit())
        if _gpus >= 1:
            config.available_features.add("cuda-device")
        if _gpus >= 2:
            config.available_features.add("cuda-devices-2")

# 'netns': this user can make network namespaces (scripts/cluster.sh, the
# emulated cluster). Probed by adding and deleting a uniquely named one.
def can_make_netns():
    import subprocess
    if not all(shutil.which(t) for t in ["ip", "tc", "unshare", "taskset",
                                          config.mpiexec]):
        return False
    name = "oasr-probe-%d" % os.getpid()
    try:
        made = subprocess.call(["ip", "netns", "add", name],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30) == 0
        if made:
            subprocess.call(["ip", "netns", "del", name],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, timeout=30)
        return made
    except (OSError, subprocess.SubprocessError):
        return False

if can_make_netns():
    config.available_features.add("netns")

# Whether this process may run a thread at SCHED_FIFO (oasr-run
# --comm-priority=realtime): root, CAP_SYS_NICE or RLIMIT_RTPRIO >= 1.
def can_sched_fifo():
    import subprocess
    if not shutil.which("chrt"):
        return False
    return subprocess.call(["chrt", "-f", "1", "true"],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) == 0

if can_sched_fifo():
    config.available_features.add("sched-fifo")

# Whether a test may mount a small tmpfs in a mount namespace of its own
# (a full disk: root or CAP_SYS_ADMIN).
def can_mount_tmpfs():
    import subprocess, tempfile
    if not shutil.which("unshare"):
        return False
    with tempfile.TemporaryDirectory() as d:
        return subprocess.call(
            ["unshare", "-m", "sh", "-c",
             "mount -t tmpfs -o size=64k tmpfs '%s'" % d],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=30) == 0

if can_mount_tmpfs():
    config.available_features.add("tmpfs")

def has_python_module(name):
    import subprocess
    return subprocess.call([config.oasr_python, "-c", "import " + name],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) == 0

for mod in ["onnx", "torch", "torchvision", "sklearn"]:
    if has_python_module(mod):
        config.available_features.add("py-" + mod)

# ONNX Runtime's training package lives in its own virtual environment
# (scripts/setup.sh makes it: Debian's python3 with --system-site-packages
# plus PyPI's onnxruntime-training); `ort-training` when it imports.
ort_python = os.path.join(
    os.environ.get("OASR_ORT_VENV", "/root/venv-ort"), "bin", "python")
config.substitutions.insert(0, ("%ort_python", ort_python))
if os.path.exists(ort_python):
    import subprocess
    if subprocess.call([ort_python, "-c", "import onnxruntime.training.api"],
                       stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL) == 0:
        config.available_features.add("ort-training")
    if subprocess.call([ort_python, "-c", "import safetensors, torch"],
                       stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL) == 0:
        config.available_features.add("py-safetensors")
llvm_config.with_environment("ORT_LOGGING_LEVEL", "3")

# A PyTorch >= 2.9 whose torch.onnx.export defaults to the dynamo exporter
# (torchvision and onnxscript beside it), for the tests of what that
# exporter writes: $OASR_TORCH2_PYTHON, else the benchmarks' PyPI venv.
torch2_python = os.environ.get("OASR_TORCH2_PYTHON",
                               "/root/venv-torch/bin/python")
config.substitutions.insert(0, ("%torch2_python", torch2_python))
if os.path.exists(torch2_python):
    import subprocess
    probe = ("import torch, torchvision, onnxscript; "
             "v = tuple(int(x) for x in torch.__version__.split('.')[:2]); "
             "raise SystemExit(0 if v >= (2, 9) else 1)")
    if subprocess.call([torch2_python, "-c", probe], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL) == 0:
        config.available_features.add("torch-dynamo-export")
