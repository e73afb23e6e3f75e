"""The launch of a PyTorch DDP peer on the emulated cluster, shared by
bench/ddp_step.py and bench/ddp_train.py: the rendezvous options, the rank
and world size from the launcher's environment (Open MPI's, or RANK and
WORLD_SIZE), and gloo with one compute thread a rank."""
import os
import sys


def add_rendezvous_args(p):
    p.add_argument("--master", default=os.environ.get("MASTER_ADDR"),
                   help="rank 0's address (MASTER_ADDR)")
    p.add_argument("--port", type=int, default=int(os.environ.get("MASTER_PORT", "29500")))
    p.add_argument("--ifname", default=os.environ.get("GLOO_SOCKET_IFNAME", "eth0"),
                   help="interface gloo's sockets use (GLOO_SOCKET_IFNAME)")


def _env_int(names):
    for n in names:
        if n in os.environ:
            return int(os.environ[n])
    return None


def rank_and_world(prog, a):
    """(rank, world size); exits naming `prog` when either or --master is
    missing."""
    rank = _env_int(["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "RANK"])
    world = _env_int(["OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"])
    if rank is None or world is None:
        sys.exit(f"{prog}: error: no rank/world size in the environment "
                 "(launch it with mpirun or scripts/cluster.sh run, or set RANK and WORLD_SIZE)")
    if not a.master:
        sys.exit(f"{prog}: error: --master (or MASTER_ADDR) is required: rank 0's address")
    return rank, world


def init_gloo(a, rank, world, timeout_s=None):
    """One compute thread, gloo over --ifname, the rendezvous on --master;
    `timeout_s` sets the process group's timeout (default: PyTorch's, 30
    minutes for gloo)."""
    import datetime
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    extra = {} if timeout_s is None else {"timeout": datetime.timedelta(seconds=timeout_s)}
    dist.init_process_group("gloo", init_method=f"tcp://{a.master}:{a.port}",
                            rank=rank, world_size=world, **extra)
