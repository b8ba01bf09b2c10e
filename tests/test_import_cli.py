"""`archdsl import`: reading foreign files safely, the errors a user sees, and the checkpoint it writes."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import archdsl
from archdsl.cli import main
from archdsl.lang.spec import load_spec
from archdsl.nn.build import build
from archdsl.nn.convert.reference import reference_layout
from archdsl.run.checkpoint import Checkpoint, save_checkpoint

SPEC = "tiny"  # conv and MSA blocks, 32x32, 10 classes


@pytest.fixture(scope="module")
def trained():
    """A model whose BN statistics are not the defaults, so that a lost buffer would show."""
    model = build(load_spec(SPEC), seed=5).eval()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.normal_(0, 0.2)
            module.running_var.uniform_(0.5, 2.0)
    return model


def reference_state(model) -> dict[str, torch.Tensor]:
    ours = model.state_dict()
    return {key: ours[part.key].reshape(part.reference_shape) for key, part in reference_layout(model.arch).items()}


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0)))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["import", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_reference_pth_tar_with_dataparallel_prefixes_becomes_an_equal_checkpoint(trained, tmp_path, capsys):
    state = {f"module.{k}": v for k, v in reference_state(trained).items()}
    src = tmp_path / "cifar100_alternet_tiny.pth.tar"
    optimizer = {"state": {0: {"momentum_buffer": torch.zeros(2)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}
    torch.save({"name": "alternet_tiny", "state_dict": state, "optimizer": optimizer}, src)
    out = tmp_path / "tiny.safetensors"
    status, printed, _ = run(capsys, str(src), "--spec", SPEC, "--out", str(out), "--dataset", "synthetic")
    assert status == 0
    assert f"as tiny ({sum(p.numel() for p in trained.parameters()):,} params)" in printed
    checkpoint = archdsl.load_checkpoint(out)
    assert isinstance(checkpoint, Checkpoint) and not checkpoint.model.training
    assert checkpoint.arch == load_spec(SPEC)
    assert checkpoint.meta["source_format"] == "reference"
    assert checkpoint.meta["source_name"] == "alternet_tiny"
    assert checkpoint.meta["dataset"] == "synthetic"
    assert len(checkpoint.meta["source_sha256"]) == 64
    assert torch.equal(logits(checkpoint.model), logits(trained))


@pytest.mark.parametrize("container", ["top level", "model", "safetensors"])
def test_plain_state_dicts_import_in_archdsls_own_layout(trained, tmp_path, capsys, container):
    state = trained.state_dict()
    src = tmp_path / ("w.safetensors" if container == "safetensors" else "w.pth")
    if container == "safetensors":
        save_file({k: v.contiguous() for k, v in state.items()}, src)
    else:
        torch.save(state if container == "top level" else {"model": state, "epoch": 3}, src)
    out = tmp_path / "w-archdsl.safetensors"
    assert run(capsys, str(src), "--spec", SPEC, "--out", str(out))[0] == 0
    checkpoint = archdsl.load_checkpoint(out)
    assert checkpoint.meta["source_format"] == "archdsl"
    assert torch.equal(logits(checkpoint.model), logits(trained))


def test_a_timm_style_checkpoint_with_its_argparse_namespace_loads(trained, tmp_path, capsys):
    src = tmp_path / "model_best.pth.tar"
    torch.save({"state_dict": trained.state_dict(), "args": argparse.Namespace(lr=0.1, model="tiny")}, src)
    assert run(capsys, str(src), "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"))[0] == 0


class RunsCodeWhenUnpickled:
    """Unpickling this calls Path.touch: the kind of side effect weights_only must prevent."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_file_that_needs_arbitrary_objects_is_refused_without_running_them(trained, tmp_path, capsys):
    marker = tmp_path / "code-ran"
    src = tmp_path / "evil.pth.tar"
    torch.save({"state_dict": trained.state_dict(), "payload": RunsCodeWhenUnpickled(marker)}, src)
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"))
    assert status == 1
    assert "refused" in err and "arbitrary Python objects" in err and "(it needs " in err
    assert "Traceback" not in err and "allowlist" not in err
    assert not marker.exists()
    assert not (tmp_path / "o.safetensors").exists()


@pytest.mark.parametrize("protocol", [4, 5])
def test_a_legacy_file_of_a_newer_pickle_protocol_says_what_it_is(trained, tmp_path, capsys, protocol):
    """torch's safe loader cannot read protocol 4's FRAME: the file holds only tensors, so it is
    not one that "would unpickle arbitrary Python objects"; and torch's warning is not the user's."""
    src = tmp_path / "legacy.pth"
    torch.save(trained.state_dict(), src, _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"))
    assert status == 1
    assert f"torch.save's legacy format with pickle protocol {protocol}" in err and "arbitrary" not in err
    assert "torch.save(torch.load(" in err  # the way to re-save it
    assert "UserWarning" not in err and "Traceback" not in err


def test_an_archdsl_checkpoint_is_already_one(trained, tmp_path, capsys):
    src = save_checkpoint(tmp_path / "mine.safetensors", trained, trained.arch)
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"))
    assert status == 1 and "already an archdsl checkpoint" in err


def test_missing_and_mis_shaped_weights_are_named_with_counts(trained, tmp_path, capsys):
    state = dict(trained.state_dict())
    removed = sorted(k for k in state if k.startswith("stages.c3.1."))
    for key in removed:
        del state[key]
    state["head.fc.weight"] = torch.zeros(100, 256)  # trained for 100 classes
    src = tmp_path / "w.pth"
    torch.save(state, src)
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"))
    assert status == 1
    assert f"{len(removed)} missing: {removed[0]}" in err
    assert "1 of the wrong shape: head.fc.weight 100x256 (expected 10x256)" in err
    assert "Traceback" not in err


def test_classes_can_be_overridden_to_fit_the_file(trained, tmp_path, capsys):
    arch = load_spec(SPEC).model_copy(update={"classes": 7})
    src = tmp_path / "w7.pth"
    torch.save(build(arch, seed=1).state_dict(), src)
    out = tmp_path / "o.safetensors"
    assert run(capsys, str(src), "--spec", SPEC, "--classes", "7", "--out", str(out))[0] == 0
    assert archdsl.load_checkpoint(out).arch.classes == 7


def test_an_unknown_layout_shows_its_first_keys(tmp_path, capsys):
    src = tmp_path / "w.pth"
    torch.save({"encoder.weight": torch.zeros(2), "decoder.weight": torch.zeros(2)}, src)
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"))
    assert status == 1 and "no known layout (first keys: decoder.weight, encoder.weight)" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not a PyTorch or safetensors file"),
        (b"this is not a checkpoint", "not a PyTorch or safetensors file"),
        (b"myhost\n", "not a PyTorch or safetensors file"),  # /etc/hostname: once called a dangerous pickle
        (b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little"), "not a readable PyTorch file"),
    ],
)
def test_foreign_files_are_a_clear_error(tmp_path, capsys, content, message):
    src = tmp_path / "w.pth"
    src.write_bytes(content)
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"))
    assert status == 1 and message in err and "Traceback" not in err
    assert "unpickle" not in err


def test_a_dict_without_weights_names_its_keys(tmp_path, capsys):
    src = tmp_path / "w.pth"
    torch.save({"epoch": 3, "best_acc": 0.5}, src)
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"))
    assert status == 1 and "found no state dict" in err and "'epoch', 'best_acc'" in err


def test_the_output_is_checked_before_the_source_is_read(tmp_path, capsys):
    out = tmp_path / "exists.safetensors"
    out.write_bytes(b"precious")
    status, _, err = run(capsys, str(tmp_path / "missing.pth"), "--spec", SPEC, "--out", str(out))
    assert status == 1 and "already exists" in err and "--force" in err
    assert out.read_bytes() == b"precious"


def test_an_unknown_format_lists_the_known_ones(tmp_path, capsys):
    status, _, err = run(capsys, "x.pth", "--spec", SPEC, "--out", str(tmp_path / "o.safetensors"), "--format", "caffe")
    assert status == 1 and "unknown checkpoint format 'caffe'" in err and "reference" in err


def test_a_missing_source_is_named_and_leaves_no_empty_folder(tmp_path, capsys):
    out = tmp_path / "new" / "o.safetensors"
    status, _, err = run(capsys, str(tmp_path / "nope.pth"), "--spec", SPEC, "--out", str(out))
    assert status == 1 and "nope.pth: no such file" in err
    assert not (tmp_path / "new").exists()


def test_load_checkpoint_is_public_api() -> None:
    from archdsl.run import checkpoint

    assert archdsl.load_checkpoint is checkpoint.load_checkpoint
    assert "load_checkpoint" in archdsl.__all__


@pytest.mark.slow  # builds ViT-Ti twice (5.4 M parameters) and runs it
def test_a_released_style_timm_file_imports_as_vit_ti(tmp_path, capsys):
    # The authors' ViT-Ti file: a timm VisionTransformer's state dict saved as {"state_dict": ...}.
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    vit = VisionTransformer(
        num_classes=100, img_size=32, patch_size=2, embed_dim=192, depth=12, num_heads=3, qkv_bias=False
    ).eval()
    src = tmp_path / "vit_ti_cifar100.pth.tar"
    torch.save({"name": "vit_ti", "state_dict": vit.state_dict()}, src)
    out = tmp_path / "vit-ti.safetensors"
    status, printed, err = run(capsys, str(src), "--spec", "vit-ti", "--out", str(out), "--dataset", "cifar100")
    assert status == 0, err
    assert "(timm layout" in printed
    checkpoint = archdsl.load_checkpoint(out)
    images = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (checkpoint.model(images) - vit(images)).abs().max().item() < 1e-5


# The reference's post-activation ResNet-50 (models.resnet.dnn_50), rebuilt in tests/_reference_resnet.py with its
# key names: for CIFAR-100 (stem=False) the model of the authors' released resnet_50 file, for ImageNet (stem=True:
# the 7x7 stem with its max-pool) torchvision's resnet50 layout. (fixture entry, classes, stem, spec, params, side)
POST_ACTIVATION_RESNETS = [
    ("resnet_dnn_50", 100, False, "resnet50-post", "23,705,252", 32),
    ("resnet_dnn_50_imagenet", 1000, True, "resnet50-post-imagenet", "25,557,032", 64),  # any size: a ResNet
]


@pytest.mark.slow  # a ResNet-50 built three times and run in float64
@pytest.mark.parametrize(("entry", "classes", "stem", "spec", "params", "side"), POST_ACTIVATION_RESNETS)
def test_the_references_post_activation_resnet_50_imports_with_equal_logits(
    tmp_path, capsys, entry, classes, stem, spec, params, side
):
    import json

    from _reference_resnet import PostActResNet, randomize

    reference = randomize(PostActResNet(classes=classes, stem=stem), seed=2)
    fixture = json.loads((Path(__file__).parent / "fixtures" / "reference_checkpoint_keys.json").read_text())
    transcribed = fixture["models"][entry]["keys"]
    assert [(k, list(v.shape)) for k, v in reference.state_dict().items()] == [(k, s) for k, s in transcribed]
    assert f"{sum(p.numel() for p in reference.parameters()):,}" == params
    src = tmp_path / f"resnet_50_{entry}.pth.tar"  # saved as the reference's training code saves it
    torch.save({"name": "resnet_50", "state_dict": reference.state_dict()}, src)
    out = tmp_path / f"{spec}.safetensors"
    status, printed, err = run(capsys, str(src), "--spec", spec, "--out", str(out))
    assert status == 0, err
    assert f"(reference layout, 320 tensors) as {spec} ({params} params)" in printed
    model = archdsl.load_checkpoint(out).model
    images = torch.randn(2, 3, side, side, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = reference.double()(images.double()), model.double()(images.double())
    assert got.shape == (2, classes)
    assert (got - want).abs().max().item() <= 1e-10 * want.abs().max().item()


def test_a_post_activation_file_for_a_pre_activation_spec_names_the_spec_to_use(tmp_path, capsys):
    from _reference_resnet import PostActResNet

    src = tmp_path / "resnet_50.pth.tar"
    torch.save({"state_dict": PostActResNet(blocks=(1, 1, 1, 1), classes=10).state_dict()}, src)
    status, _, err = run(capsys, str(src), "--spec", "tiny", "--out", str(tmp_path / "x.safetensors"))
    assert status != 0 and "post-activation ResNet" in err and "--spec resnet50-post" in err
    assert "Traceback" not in err and not (tmp_path / "x.safetensors").exists()


def test_weights_with_nan_are_refused_and_nothing_is_written(trained, tmp_path, capsys):
    # Such a checkpoint would be refused by load_checkpoint (and eval/analyze) afterwards.
    state = trained.state_dict()
    state["head.fc.weight"] = state["head.fc.weight"].clone()
    state["head.fc.weight"][0, 0] = float("nan")
    src = tmp_path / "diverged.pth"
    torch.save(state, src)
    out = tmp_path / "diverged.safetensors"
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--out", str(out))
    assert status == 1 and "1 weight tensor holds NaN or infinite values: head.fc.weight" in err
    assert "Traceback" not in err and not out.exists()


def test_a_design_over_the_memory_limit_is_refused_before_the_source_is_read(tmp_path, capsys):
    src = tmp_path / "garbage.pth"
    src.write_bytes(b"not a checkpoint at all")
    status, _, err = run(capsys, str(src), "--spec", SPEC, "--classes", "2000000000", "--out", str(tmp_path / "x"))
    assert status == 1 and "needs about" in err and "GiB limit" in err and "garbage.pth" not in err


def _zip_bomb(path: Path, inflated_mib: int) -> None:
    """A torch.save file whose one tensor record is deflated zeros inflating to `inflated_mib` MiB."""
    import zipfile

    plain = path.with_suffix(".plain")
    torch.save({"state_dict": {"stem.weight": torch.zeros(4)}}, plain)
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(path, "w", compresslevel=1) as bomb:
        for info in source.infolist():
            if not info.filename.endswith("/data/0"):
                bomb.writestr(info, source.read(info))
                continue
            record = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            record.compress_type = zipfile.ZIP_DEFLATED
            with bomb.open(record, "w", force_zip64=True) as out:
                chunk = bytes(1 << 20)
                for _ in range(inflated_mib):
                    out.write(chunk)


def _peak_growth(tmp_path: Path, argv: list[str]) -> tuple[int, str, int]:
    """(exit status, stderr, bytes by which the peak resident memory grew) of `archdsl ARGV` in a
    fresh process, measured from after its imports, so only what the command itself holds counts."""
    import subprocess
    import sys

    code = (
        # /proc's VmHWM: this process's peak since its exec (ru_maxrss would start at pytest's, carried over).
        "def peak():\n"
        "    return int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) * 1024\n"
        "import sys\n"
        "import torch, archdsl.run.importer, archdsl.nn.build, archdsl.nn.convert\n"
        "from archdsl.cli import main\n"
        "before = peak()\n"
        "status = main(sys.argv[1:])\n"
        "print(peak() - before)\n"
        "sys.exit(status)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300)
    return result.returncode, result.stderr, int(result.stdout.split()[-1]) if result.stdout.split() else 1 << 40


def test_a_compressed_record_is_refused_before_anything_inflates(tmp_path):
    """torch.save never compresses; a 0.5 MB file whose record inflates to 512 MiB is refused from
    the zip's directory, before torch reads it (it used to peak at the inflated size and more)."""
    src = tmp_path / "bomb.pth"
    _zip_bomb(src, inflated_mib=512)
    assert src.stat().st_size < 1 << 20
    status, err, growth = _peak_growth(tmp_path, [
        "import", str(src), "--spec", SPEC, "--out", str(tmp_path / "out.safetensors"),
    ])  # fmt: skip
    assert status == 1, err
    assert (
        err.startswith(f"archdsl: error: {src}: refused: its record 'bomb/data/0' is compressed (5")
        and "inflate to 536,870,912), which torch.save never does" in err
    ), err
    assert growth < 64 << 20  # measured: about 1 MB (before: the inflated record, 512 MiB, and more)
    assert not (tmp_path / "out.safetensors").exists()


def test_import_checkpoint_is_the_command_as_a_function(trained, tmp_path):
    src = tmp_path / "weights.pth"
    torch.save({"state_dict": trained.state_dict()}, src)
    written = archdsl.import_checkpoint(src, load_spec(SPEC), tmp_path / "out.safetensors", dataset="synthetic")
    assert written.path == tmp_path / "out.safetensors" and written.source_name == "weights.pth"
    assert written.source_format == "archdsl" and written.tensors == len(trained.state_dict())
    assert written.params == sum(p.numel() for p in trained.parameters())
    checkpoint = archdsl.load_checkpoint(written.path)
    assert checkpoint.meta["dataset"] == "synthetic" and checkpoint.meta["imported_from"] == "weights.pth"
    assert torch.equal(logits(checkpoint.model), logits(trained))


def test_import_checkpoint_checks_the_format_before_reading_the_source(tmp_path):
    from archdsl.errors import UserError

    with pytest.raises(UserError, match="unknown checkpoint format 'caffe'"):
        archdsl.import_checkpoint(
            tmp_path / "absent.pth", load_spec(SPEC), tmp_path / "o.safetensors", source_format="caffe"
        )
    assert not (tmp_path / "o.safetensors").exists()
