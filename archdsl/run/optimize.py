"""The fast version of a model: `optimize_model`, the one place that decides how a model runs.

    fast = optimize_model(model, training=False, images=len(test_set))   # a frozen copy for inference
    model = optimize_model(model, training=True)                         # in place, for training

What it applies, where, and why (figures: benchmarks/optimize.py, table in benchmarks/README.md):

- channels_last memory (NHWC). oneDNN's convolutions on the CPU, and cuDNN's tensor-core
  kernels, run 1x1 convs as plain matrix products in that layout; in NCHW they reorder their
  input and output on every call. Inference on the CPU and everything on CUDA.
- BatchNorm folded into the conv before it (inference only): in eval mode a BN is a fixed
  affine map, so conv -> BN is one conv with a bias. In a pre-activation block the BNs that
  follow a conv of the same block fold (2 of 3 in a bottleneck, 1 of 2 in a basic block,
  the one before the attention in an MSA block); the first reads the residual stream, which
  the shortcut also reads, and stays.
- `torch.compile` only where it pays off: compiling costs tens of seconds (more on busy
  cores) and saves a share of each image's time, so it is worth it only for enough images
  (`COMPILE_MIN_IMAGES`). Inductor caches its kernels on disk, so the next process compiles
  faster. Never for double backward (Hessians): compiled graphs have none.

What is not here, because it is in the code everyone runs: the q, k and v projections of the
attention are matrix products on the window tokens, the window partition is one copy, training
takes an explicit baddbmm-softmax-bmm instead of SDPA's math kernel, and an MSA whose heads are
wider than its channels trains with its products reordered (`archdsl.nn.blocks.attention`;
benchmarks/attention.py); bf16 autocast on CUDA belongs to the training step and to
`predict_logits(amp=...)`, since the loss must be computed in float32 too; in inference the
attention kernel is torch's choice (its fused CPU kernel is as fast as the math one for 16-token
windows and faster for larger ones), except for Hessians, which need the math kernel
(`math_attention`).

The parameters of an inference copy are frozen (no gradients to them); gradients to the
input still flow, and agree with the eager model's.
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, TypeVar, overload

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from archdsl.run.device import model_device

# Images a model must see before `torch.compile` repays its compile time (set by
# benchmarks/optimize.py; see the module docstring). Keyed by (device type, training).
COMPILE_MIN_IMAGES: dict[tuple[str, bool], int] = {
    # Inference on the CPU: tiny's copy compiled in 17-20 s of CPU (43 s wall on busy cores) and
    # then ran 1.18x faster than the micro-batched copy (805 vs 683 img/s on one thread), so
    # compiling breaks even at 75-90k images; analyze's defaults on synthetic see 76k.
    ("cpu", False): 100_000,
    ("cpu", True): 10**12,  # training on the CPU: compile gains ~3 % for minutes of compiling
    ("cuda", False): 50_000,
    ("cuda", True): 200_000,
}


@dataclass(frozen=True)
class OptimizePlan:
    """What `optimize_model` applies to one model (see `plan_for`)."""

    channels_last: bool
    fold_batchnorm: bool
    compile: bool
    micro_batch: bool  # inference on the CPU: big batches run in cache-sized pieces

    def describe(self) -> str:
        parts = [
            name
            for name, on in (
                ("channels_last", self.channels_last),
                ("BN folded", self.fold_batchnorm),
                ("compiled", self.compile),
                ("micro-batched", self.micro_batch),
            )
            if on
        ]
        return ", ".join(parts) or "as built"


def can_compile(device: torch.device) -> bool:
    """Inductor generates C++ on the CPU (it needs a compiler) and Triton on CUDA."""
    if device.type == "cpu":
        return shutil.which("g++") is not None or shutil.which("c++") is not None
    return device.type == "cuda"


def plan_for(
    device: torch.device | str,
    *,
    training: bool,
    images: int | None = None,
    compile: bool | None = None,
    channels_last: bool | None = None,
) -> OptimizePlan:
    """The transforms worth applying on `device`; `images` is how many the model will see (None: few).

    `compile=None` decides by `images` (see `COMPILE_MIN_IMAGES`); True or False forces it
    (True is still refused where inductor cannot run). `channels_last=None` decides by the
    device; True or False forces it.
    """
    device = torch.device(device)
    threshold = COMPILE_MIN_IMAGES.get((device.type, training))
    if compile is None:
        compile = threshold is not None and images is not None and images >= threshold
    return OptimizePlan(
        channels_last=device.type in ("cpu", "cuda") if channels_last is None else channels_last,
        fold_batchnorm=not training,
        compile=bool(compile) and can_compile(device),
        micro_batch=device.type == "cpu" and not training,
    )


ModuleT = TypeVar("ModuleT", bound=nn.Module)
PLAN_ATTRIBUTE = "optimize_plan"  # where a model optimized for training records its plan


@overload
def optimize_model(
    model: ModuleT,
    *,
    training: Literal[True],
    device: torch.device | str | None = None,
    images: int | None = None,
    compile: bool | None = None,
    channels_last: bool | None = None,
) -> ModuleT: ...


@overload
def optimize_model(
    model: nn.Module,
    *,
    training: Literal[False],
    device: torch.device | str | None = None,
    images: int | None = None,
    compile: bool | None = None,
    channels_last: bool | None = None,
) -> InferenceModel: ...


def optimize_model(
    model: nn.Module,
    *,
    training: bool,
    device: torch.device | str | None = None,
    images: int | None = None,
    compile: bool | None = None,
    channels_last: bool | None = None,
) -> nn.Module:
    """The fast version of `model` on `device` (default: where its parameters are).

    `training=True`: `model` itself, changed in place, so that its parameters, its
    state-dict keys and any optimizer built on it stay valid; use it for training and for
    anything that differentiates with respect to the weights (a compiled model has no
    double backward: Hessians pass `compile=False`).
    `training=False`: a copy for inference, in eval mode, with frozen parameters; `model` is
    left as it is. It computes the same function (BN folded into the convs), so it stays
    valid only while the weights do not change.
    `images`: how many images the result will process; it decides whether compiling pays.
    `compile` and `channels_last` force a transform on (True) or off (False).
    """
    device = model_device(model) if device is None else torch.device(device)
    plan = plan_for(device, training=training, images=images, compile=compile, channels_last=channels_last)
    crashes = training and device.type == "cpu" and _narrow_strided_1x1(model)  # (torch 2.14: the helper says)
    if crashes and channels_last is None and plan.channels_last:
        plan = dataclasses.replace(plan, channels_last=False)
    if not training:
        model = _inference_copy(model)
        if plan.fold_batchnorm:
            fold_batchnorms(model)
    model.to(device)
    if plan.channels_last:
        model.to(memory_format=torch.channels_last)
    if not training:
        return InferenceModel(model, plan)
    if plan.compile:
        # In place (`nn.Module.compile`), so state-dict keys keep their names (torch.compile's
        # wrapper would prefix them with `_orig_mod.`).
        model.compile()
    setattr(model, PLAN_ATTRIBUTE, plan)  # what was applied: `applied_plan(model)`
    return model


def _narrow_strided_1x1(model: nn.Module) -> bool:
    """Whether `model` has a strided 1x1 convolution on fewer than 8 channels: torch 2.14's CPU backward of one in
    channels_last frees memory twice ("double free or corruption", the process aborts), measured on 1x1 stride-2
    convolutions from 2-7 input channels (8 and more train), so a CPU training keeps such a model as built."""
    return any(
        isinstance(m, nn.Conv2d) and m.kernel_size == (1, 1) and max(m.stride) > 1 and m.in_channels < 8
        for m in model.modules()
    )


def applied_plan(model: nn.Module) -> OptimizePlan | None:
    """What `optimize_model` applied to `model` (None: the model as built)."""
    plan = getattr(model, PLAN_ATTRIBUTE, None)
    return plan if isinstance(plan, OptimizePlan) else None


def _inference_copy(model: nn.Module) -> nn.Module:
    fresh = copy.deepcopy(model)
    for module in fresh.modules():
        # A copy of a module compiled in place would still call the original's compiled code.
        if getattr(module, "_compiled_call_impl", None) is not None:
            module._compiled_call_impl = None
    fresh.eval()
    fresh.requires_grad_(False)
    return fresh


def conv_norm_pairs(model: nn.Module) -> Iterator[tuple[nn.Module, str, str]]:
    """(parent, conv name, BN name) for every BN that reads only the output of that conv.

    Blocks say which of their pairs qualify through `conv_norm_pairs()` (the block knows its
    data flow; a generic pattern match would not see that a shortcut also reads a tensor).
    """
    for module in model.modules():
        pairs = getattr(module, "conv_norm_pairs", None)
        if callable(pairs):
            for conv, norm in pairs():
                yield module, conv, norm


def fold_batchnorms(model: nn.Module) -> int:
    """Fold each eval-mode BN into the conv before it (in place); returns how many were folded."""
    folded = 0
    for parent, conv_name, norm_name in list(conv_norm_pairs(model)):
        conv, norm = getattr(parent, conv_name), getattr(parent, norm_name)
        if not isinstance(conv, nn.Conv2d) or not isinstance(norm, nn.BatchNorm2d) or norm.training:
            continue
        setattr(parent, conv_name, fuse_conv_bn_eval(conv, norm))
        setattr(parent, norm_name, nn.Identity())
        folded += 1
    return folded


# Micro-batches are sized so that the largest activation of one stays near this many bytes
# (L2/L3-sized: on a 2-core EPYC a tiny net at batch 256 runs 2x faster in pieces of 32-64
# than whole, because its 64 MB activations leave the caches and are page-faulted in afresh
# by every allocation), within these bounds (fewer images per piece starve the kernels).
MICRO_BATCH_BYTES = 16 * 2**20
MICRO_BATCH_RANGE = (16, 64)


def micro_batch_size(peak_bytes_per_image: int) -> int:
    """Images per micro-batch: a power of two within MICRO_BATCH_RANGE, about MICRO_BATCH_BYTES of activation."""
    low, high = MICRO_BATCH_RANGE
    size = high
    while size > low and size * peak_bytes_per_image > MICRO_BATCH_BYTES:
        size //= 2
    return size


def peak_activation_bytes(model: nn.Module, sample: torch.Tensor) -> int:
    """The bytes of the largest output of any submodule for `sample` (one image)."""
    peak = 0

    def record(module: nn.Module, args, output) -> None:
        nonlocal peak
        if isinstance(output, torch.Tensor):
            peak = max(peak, output.numel() * output.element_size())

    handles = [module.register_forward_hook(record) for module in model.modules()]
    try:
        with torch.no_grad():
            model(sample)
    finally:
        for handle in handles:
            handle.remove()
    return peak


class InferenceModel(nn.Module):
    """What `optimize_model(training=False)` returns: a frozen model, run in pieces of one size.

    On the CPU a batch runs in micro-batches (see `micro_batch_size`); a compiled model
    compiles for one shape, the first piece's, and pads the pieces that fall short, so an
    evaluation's last partial batch costs no second compilation. In eval mode nothing mixes
    the images of a batch, so how it is cut does not change any image's result.

    Attributes it does not have itself (`arch`, `num_classes`, `stages`, `named_blocks`...)
    are the wrapped model's, so it stands in for it (`get_submodule("stages.c1.0")` works).
    """

    def __init__(self, module: nn.Module, plan: OptimizePlan) -> None:
        super().__init__()
        self.module = module
        self.optimize_plan = plan
        self.pieces: int | None = None  # images per call of the module, fixed on the first call
        # Not a submodule: the compiled wrapper would list every parameter a second time.
        self.__dict__["_compiled"] = torch.compile(module, dynamic=False) if plan.compile else None
        self.train(False)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["module"], name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        plan, compiled = self.optimize_plan, self.__dict__["_compiled"]
        if compiled is not None and _has_hooks(self.module):
            compiled = None  # hooks added after compiling (feature maps, CKA) would not run in the graph
        if self.pieces is None and (plan.micro_batch or compiled is not None):
            self.pieces = micro_batch_size(peak_activation_bytes(self.module, x[:1])) if plan.micro_batch else len(x)
        if self.pieces is None or (compiled is None and len(x) <= self.pieces):
            return self.module(x)
        run = compiled if compiled is not None else self.module
        outputs = []
        for part in x.split(self.pieces):
            short = self.pieces - len(part)
            if short and compiled is not None:
                padded = torch.cat([part, part.new_zeros((short, *part.shape[1:]))])
                outputs.append(run(padded)[: len(part)])
            else:
                outputs.append(run(part))
        return torch.cat(outputs)


def _has_hooks(module: nn.Module) -> bool:
    return any(m._forward_hooks or m._forward_pre_hooks for m in module.modules())
