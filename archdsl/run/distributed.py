"""Data-parallel training over torch.distributed: the ranks `torchrun` starts, as `train` uses them.

`torchrun --nproc-per-node N -m archdsl train ...` sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR
and MASTER_PORT; `join_from_env` reads them and opens the default process group (env://): NCCL
when the run trains on CUDA (each rank on GPU LOCAL_RANK), gloo on the CPU. Once the group is
open, `archdsl.run.train.train` trains data-parallel over it (`current()`):

- the global batch is `--batch-size`: each rank takes `batch_size / world_size` images of it,
  so the learning rate (the recipe's, for that global batch) stays as it is;
- each epoch's shuffle is one permutation of the training set from (seed, epoch), the same on
  every rank; rank r takes every N-th image of it, so the N per-rank batches of a step are, together,
  the batch one process would take (`ShardSampler`);
- DistributedDataParallel averages the gradients; BatchNorm normalises with each rank's own
  statistics (and the running statistics are rank 0's) unless `sync_bn` (torch's SyncBatchNorm,
  CUDA only) normalises with the global batch's;
- only rank 0 writes the run directory and draws progress; every rank evaluates the whole test
  set, so the metrics (and a divergence) are the same on all;
- every collective waits at most `timeout` for the other ranks: a rank that dies or hangs ends
  the run with an error, not a hang (torchrun also stops the other ranks when one exits).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from archdsl.common_settings import DEFAULT_TIMEOUT_S
from archdsl.errors import UsageError, UserError

if TYPE_CHECKING:
    import torch

# torchrun's variables; WORLD_SIZE alone marks a process it started.
_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class Ranks:
    """Where this process stands in the process group: its rank, the number of ranks, its rank on this machine."""

    rank: int
    world_size: int
    local_rank: int = 0

    @property
    def leader(self) -> bool:
        """Rank 0: the one that writes files, prints, and (in a search) talks to the study."""
        return self.rank == 0


def launched() -> bool:
    """Whether this process was started by torchrun (or another launcher that sets WORLD_SIZE)."""
    return "WORLD_SIZE" in os.environ


def join_from_env(device: str = "auto", *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Ranks:
    """Open the default process group from torchrun's variables (env://); the group already open if any.

    `device` is the run's `--device`: CUDA runs use NCCL with each rank on GPU LOCAL_RANK, others gloo.
    """
    import torch
    import torch.distributed as dist

    check_rank_device(device)
    if dist.is_initialized():
        return current() or Ranks(rank=0, world_size=1)
    missing = [name for name in _ENV if name not in os.environ]
    if missing:
        raise UserError(
            f"a distributed run needs torchrun's variables; {', '.join(missing)} not set",
            hint="start it with `torchrun --nproc-per-node N -m archdsl ...`",
        )
    rank, world_size, local_rank = (_env_number(name) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if cuda:
        if local_rank >= torch.cuda.device_count():
            raise UserError(
                f"rank {rank} wants GPU {local_rank}, but this machine has {torch.cuda.device_count()}",
                hint="start at most one rank per GPU (--nproc-per-node)",
            )
        torch.cuda.set_device(local_rank)  # "cuda" now means this rank's GPU
    try:
        dist.init_process_group(backend="nccl" if cuda else "gloo", timeout=timedelta(seconds=timeout_s))
    except (dist.DistError, RuntimeError, ValueError) as err:  # a rank that never came, a port taken, ...
        address = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
        raise UserError(
            f"rank {rank} of {world_size} could not join the process group at {address} "
            f"(with --dist-timeout {timeout_s:g} s): {str(err).strip()}",
            hint="start every rank with torchrun (`torchrun --nproc-per-node N -m archdsl ...`), "
            "or give the slow ones a longer --dist-timeout",
        ) from None
    ranks = Ranks(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local_rank)
    say_when_stopped(ranks)
    return ranks


def say_when_stopped(ranks: Ranks) -> None:
    """Have this rank say why it ends when torchrun stops it. Once one rank ends (rank 0 killed, or
    failed), torchrun's agent sends SIGTERM to every other rank; Python's default would end a
    survivor without a word, and a follower's own output is quiet (`quiet_followers`). The line goes
    to the process's real stderr (file descriptor 2), and the rank ends as a SIGTERM ends it (143):
    the epochs already finished are in the run folder's last checkpoint."""
    import signal

    def stopped(signum: int, frame: object) -> None:
        line = (
            f"archdsl: rank {ranks.rank} of {ranks.world_size}: stopped by torchrun (SIGTERM): another rank ended "
            "first, killed or failed; see its output for why, and continue from the last finished epoch with "
            "--resume\n"
        )
        with suppress(OSError):
            os.write(2, line.encode())
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)


def _env_number(name: str) -> int:
    """One of torchrun's numeric variables, or a UserError naming it."""
    value = os.environ[name]
    try:
        return int(value)
    except ValueError:
        raise UserError(
            f"{name}={value!r} is not a number", hint="start every rank with torchrun: it sets the variable"
        ) from None


def check_rank_device(device: str) -> None:
    """Under torchrun each rank trains on its LOCAL_RANK's GPU: a `--device cuda:N` would put every
    rank on GPU N, so it is refused (before anything touches CUDA)."""
    if device.startswith("cuda:") and (launched() or current() is not None):
        raise UsageError(
            f"--device {device} cannot be used under torchrun: every rank would train on that one GPU",
            hint="give --device cuda: each rank uses the GPU of its LOCAL_RANK",
        )


def join_if_launched(device: str = "auto", *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Ranks | None:
    """Under torchrun, join the group (`join_from_env`); None outside torchrun. `archdsl.train` and
    `archdsl.search` call this, so that they train data-parallel from Python under torchrun too;
    the group stays open for the caller (a command closes it with `command_scope`)."""
    if not launched():
        return None
    return join_from_env(device, timeout_s=timeout_s)


def quiet_followers(ranks: Ranks | None) -> None:
    """For a command: the ranks after the first print nothing (their stdout and stderr go nowhere
    until `command_scope` ends), so that rank 0 alone speaks for the group."""
    if ranks is not None and not ranks.leader:
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115  # closed by command_scope


@contextmanager
def command_scope() -> Iterator[None]:
    """Around a command that may run under torchrun (`quiet_followers`): its output streams put back (so that an error
    of any rank is still printed) and the process group closed when the command ends."""
    out, err = sys.stdout, sys.stderr
    try:
        yield
    finally:
        if sys.stdout is not out:
            sys.stdout.close()
        sys.stdout, sys.stderr = out, err
        leave()


def current() -> Ranks | None:
    """This process's place in the default process group, or None when no group is open."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    return Ranks(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))


def leave() -> None:
    """Close the default process group, if open (at the end of a command)."""
    # Never opened: no need to import torch for it (a --dry-run). Nor after Ctrl-C cut torch's import short
    # (`torch` gone from sys.modules, some of its modules left): importing it again would fail on the half.
    dist = sys.modules.get("torch.distributed")
    if dist is None or "torch" not in sys.modules:
        return
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def exit_rank(status: int) -> NoReturn:
    """End this rank's process now with `status`, its output flushed, without the interpreter's teardown.

    For the end of a program that torchrun started, once its process group is closed (`leave`).
    torch (2.14 seen) keeps a gloo group that DistributedDataParallel used alive after
    `destroy_process_group`: its threads are still running when the process exits. Now and then a
    rank that finished its work then aborts in that teardown ("terminate called without an active
    exception", exit -6), as its peers close their sockets, and torchrun reports the whole run as
    failed (seen twice in full test runs of 2-rank jobs on a loaded 2-core machine). Skipping the teardown (os._exit)
    takes that away; what it would have done is done here first: the logs and the streams flushed.
    Every file a command writes is closed when the command returns."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            stream.flush()
    os._exit(status)


def per_rank_batch(batch_size: int, ranks: Ranks) -> int:
    """Each rank's share of the global batch; a UserError when the ranks cannot share it evenly."""
    if batch_size % ranks.world_size:
        raise UserError(
            f"the global batch of {batch_size} cannot be split evenly over {ranks.world_size} ranks",
            hint=f"use a --batch-size that is a multiple of {ranks.world_size}",
        )
    return batch_size // ranks.world_size


class ShardSampler:
    """Rank r's indices of one epoch: every `world_size`-th index of the epoch's permutation, from r.

    The permutation (from `seed`) is cut to whole global batches first, so that every rank takes
    the same number of steps; the b images of step t on all ranks are then, together, images
    t*B to (t+1)*B - 1 of the permutation (B = b * world_size), one process's batch t.
    """

    def __init__(self, size: int, ranks: Ranks, global_batch: int, seed: int) -> None:
        self.size, self.ranks, self.global_batch, self.seed = size, ranks, global_batch, seed

    def __len__(self) -> int:
        return (self.size // self.global_batch) * self.global_batch // self.ranks.world_size

    def __iter__(self) -> Iterator[int]:
        import torch

        generator = torch.Generator().manual_seed(self.seed)
        order = torch.randperm(self.size, generator=generator)
        kept = (self.size // self.global_batch) * self.global_batch
        return iter(order[self.ranks.rank : kept : self.ranks.world_size].tolist())


def sync_batchnorm(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """`model` with its BatchNorm layers as torch's SyncBatchNorm (the same parameters)."""
    import torch

    if device.type != "cuda":
        raise UserError(
            "--sync-bn needs CUDA devices: torch's SyncBatchNorm does not run on the CPU",
            hint="leave --sync-bn out on the CPU (each rank then normalises with its own batch)",
        )
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)


def data_parallel(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """`model` wrapped in DistributedDataParallel (gradients averaged over the ranks at each step)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)


def mean_over_ranks(values: list[float]) -> list[float]:
    """The element-wise mean of `values` over all ranks (every rank gets the same numbers)."""
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64)
    if _backend_device().type == "cuda":
        tensor = tensor.cuda()
    dist.all_reduce(tensor)
    return (tensor / dist.get_world_size()).tolist()


def sum_over_ranks(values: list[float]) -> list[float]:
    """The element-wise sum of `values` over all ranks."""
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64)
    if _backend_device().type == "cuda":
        tensor = tensor.cuda()
    dist.all_reduce(tensor)
    return tensor.tolist()


def same_buffers(model: torch.nn.Module) -> None:
    """Rank 0's buffers (BatchNorm's running statistics) on every rank: DDP sends them at each step's
    start, so after the last step each rank holds its own."""
    import torch.distributed as dist

    for buffer in model.buffers():
        dist.broadcast(buffer.data, src=0)


def from_leader(value: Any) -> Any:
    """Rank 0's `value` (any picklable object) on every rank."""
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0, device=_backend_device())
    return box[0]


def gathered(value: Any) -> list[Any]:
    """Every rank's `value` (any picklable object), in rank order, on every rank."""
    import torch.distributed as dist

    values: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


class RankLost(UserError):
    """Another rank of a data-parallel run stopped, or did not answer within the process group's timeout."""

    def __init__(self, err: BaseException, run_dir: Path | None) -> None:
        import torch.distributed as dist

        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        kept = f"; the last finished epoch is kept in {run_dir}: continue with --resume" if run_dir else ""
        super().__init__(
            f"rank {dist.get_rank()}: another rank of this run stopped or stopped answering ({first})",
            hint=f"see the other ranks' output for why{kept}",
        )


# What torch says when a collective's peer is gone or late (gloo, NCCL, the TCP store).
_LOST_MARKERS = ("connection closed by peer", "connection reset", "timed out", "timeout", "nccl", "gloo", "broken pipe")


def is_lost_rank(err: BaseException) -> bool:
    """Whether `err` is a collective failing for want of another rank (not an error of this rank's own)."""
    import torch.distributed as dist

    if isinstance(err, dist.DistError):
        return True
    text = str(err).lower()
    return any(marker in text for marker in _LOST_MARKERS) and "out of memory" not in text


def _backend_device() -> torch.device:
    """Where the group's collectives take their tensors: the rank's GPU for NCCL, the CPU for gloo."""
    import torch
    import torch.distributed as dist

    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
