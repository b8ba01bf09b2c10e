"""`train --config FILE.yaml` and `search --config FILE.yaml`: the file's keys are the command's
flags, each value checked as the flag's, and a flag on the command line wins over the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from archdsl.cli import build_parser, main


def _file(tmp_path: Path, text: str, name: str = "run.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _parse(argv: list[str]):
    return build_parser().parse_args(argv)


def test_the_file_sets_flags_and_the_command_line_wins(tmp_path):
    config = _file(tmp_path, "spec: tiny\ndataset: synthetic\nepochs: 7\nbatch-size: 32\nlr: 0.05\n")
    args = _parse(["train", "--config", config, "--epochs", "2"])
    assert (args.spec, args.dataset) == ("tiny", "synthetic")  # a positional and a required flag from the file
    assert (args.epochs, args.batch_size, args.lr) == (2, 32, 0.05)
    args = _parse(["train", "alter50", "--dataset", "cifar100", f"--config={config}"])
    assert (args.spec, args.dataset, args.epochs) == ("alter50", "cifar100", 7)


def test_a_parser_forgets_the_file_after_one_command_line(tmp_path):
    parser = build_parser()
    parser.parse_args(["train", "--config", _file(tmp_path, "spec: tiny\ndataset: synthetic\nepochs: 7\n")])
    args = parser.parse_args(["train", "tiny", "--dataset", "synthetic"])
    assert args.epochs is None
    with pytest.raises(SystemExit):  # --dataset is required again
        parser.parse_args(["train", "tiny"])


def test_keys_may_use_dashes_or_underscores(tmp_path):
    dashes = _parse(["search", "--config", _file(tmp_path, "n-trials: 3\nbatch-size: 16\nmax-params: 2e6\n")])
    underscores = _parse(["search", "--config", _file(tmp_path, "n_trials: 3\nbatch_size: 16\nmax_params: 2e6\n")])
    assert vars(dashes) | {"config": None} == vars(underscores) | {"config": None}
    assert (dashes.n_trials, dashes.batch_size, dashes.max_params) == (3, 16, 2e6)


def test_a_yaml_list_and_the_comma_string_are_one_setting(tmp_path):
    as_list = "objectives: [accuracy, params]\nsearch: [k, heads]\nseverities: [1, 5]\n"
    as_text = "objectives: accuracy,params\nsearch: k,heads\nseverities: 1,5\n"
    from_list = _parse(["search", "--config", _file(tmp_path, as_list, "list.yaml")])
    from_text = _parse(["search", "--config", _file(tmp_path, as_text, "text.yaml")])
    from_flags = _parse(["search", "--objectives", "accuracy,params", "--search", "k,heads", "--severities", "1,5"])
    for args in (from_list, from_text):
        assert (args.objectives, args.search, args.severities) == ("accuracy,params", "k,heads", (1, 5))
        assert vars(args) | {"config": None} == vars(from_flags)


@pytest.mark.parametrize(
    "text, flags",
    [
        ("optimize: false", ["--no-optimize"]),
        ("no-optimize: true", ["--no-optimize"]),
        ("no_progress: true\nseed_endpoints: true", ["--no-progress", "--seed-endpoints"]),
        ("progress: false\ndry_run: true", ["--no-progress", "--dry-run"]),
        ("optimize: true\ndry-run: false", ["--optimize"]),  # (a switch pair: true is given, not left out)
        ("seed_endpoints: false", ["--no-seed-endpoints"]),  # a switch pair generated from its field
    ],
)
def test_a_switch_is_true_or_false(tmp_path, text, flags):
    args = _parse(["search", "--config", _file(tmp_path, text + "\n")])
    assert vars(args) | {"config": None} == vars(_parse(["search", *flags]))


def test_train_switches(tmp_path):
    config = _file(tmp_path, "spec: tiny\ndataset: synthetic\nresume: true\noptimize: false\n")
    args = _parse(["train", "--config", config])
    assert (args.resume, args.optimize) == (True, False)


@pytest.mark.parametrize(
    "text, message",
    [
        ("epochs: 0\n", "argument --epochs: expected a value greater than 0, got '0'"),
        ("recipe: sgd\n", "argument --recipe: invalid choice: 'sgd' (choose from 'deit', 'weak', 'fast')"),
        ("device: tpu\n", "argument --device: unknown device 'tpu'"),
        ("seed: 0.5\n", "argument --seed: invalid int value: '0.5'"),
    ],
)
def test_a_bad_value_fails_as_the_flag_does(tmp_path, capsys, text, message):
    flag, value = text.strip().split(": ")
    with pytest.raises(SystemExit):
        main(["train", "tiny", "--dataset", "synthetic", f"--{flag}", value])
    assert message in capsys.readouterr().err  # the flag's own message...
    config = _file(tmp_path, "# settings\n" + text)
    assert main(["train", "tiny", "--dataset", "synthetic", "--config", config]) == 2
    err = capsys.readouterr().err
    assert f"{config}:2: {message}" in err and "Traceback" not in err  # ...with the file and line


@pytest.mark.parametrize(
    "text, error",
    [
        ("epoch: 3\n", "run.yaml:1: `epoch` is not a setting of `archdsl train`\n  hint: did you mean `epochs`?"),
        ("epochs: 3\nbatch_siz: 8\n", "run.yaml:2: `batch_siz` is not a setting of `archdsl train`\n"),
        ("epochs: [1\n", "run.yaml:2: not valid YAML: expected ',' or ']'"),
        ("epochs: 3\n  lr: 1\n", "run.yaml:2: not valid YAML: mapping values are not allowed here"),
        ("- epochs\n- 3\n", "run.yaml: expected settings, one `key: value` per line, got a YAML list"),
        ("just words\n", "run.yaml: expected settings, one `key: value` per line, got a YAML str"),
        ("config: other.yaml\n", "run.yaml:1: a config file cannot name another one (`config`)"),
        ("help: true\n", "run.yaml:1: `help` is not a setting\n  hint: run `archdsl train --help`"),
        ("batch_size: 8\nbatch-size: 16\n", "run.yaml:2: `batch-size` sets --batch-size again (line 1)"),
        ("epochs: 1\nepochs: 2\n", "run.yaml:2: `epochs` sets --epochs again (line 1)"),
        (
            "optimize: false\nno-optimize: true\n",
            "run.yaml:2: `no-optimize` sets --optimize/--no-optimize again (line 1)",
        ),
        ("lr:\n", "run.yaml:1: `lr` has no value"),
        ("epochs: [1, 2]\n", "run.yaml:1: argument --epochs: expected one value, got a list"),
        ("resume: yes please\n", "run.yaml:1: `resume` is a switch (--resume/--no-resume): expected true or false"),
        ("out: no\n", "run.yaml:1: argument --out: expected a value, got false"),
        ("out: {a: 1}\n", "run.yaml:1: argument --out: expected a value"),
        ("!!python/object/apply:os.system [echo]\n", "run.yaml:1: not valid YAML: could not determine a constructor"),
    ],
)
def test_a_mistake_in_the_file_is_one_clear_error_and_creates_nothing(tmp_path, monkeypatch, capsys, text, error):
    monkeypatch.chdir(tmp_path)
    _file(tmp_path, text)
    assert main(["train", "tiny", "--dataset", "synthetic", "--config", "run.yaml", "--out", "new"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"archdsl: error: {error}"), err
    assert "Traceback" not in err and len(err.splitlines()) <= 2  # the message and at most a hint
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    "path, error",
    [
        ("missing.yaml", "--config missing.yaml: No such file or directory"),
        (".", "--config .: Is a directory"),
        ("latin1.yaml", "--config latin1.yaml: not a UTF-8 text file"),
    ],
)
def test_an_unreadable_file_is_named(tmp_path, monkeypatch, capsys, path, error):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "latin1.yaml").write_bytes(b"out: caf\xe9\n")
    assert main(["search", "--config", path, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err == f"archdsl: error: {error}\n"


def test_an_empty_file_sets_nothing(tmp_path, capsys):
    """A file of comments only (a template) is no mistake; the command line still needs its spec."""
    config = _file(tmp_path, "# epochs: 3\n")
    assert _parse(["train", "tiny", "--dataset", "synthetic", "--config", config]).epochs is None
    with pytest.raises(SystemExit) as info:
        main(["train", "--config", config])
    assert info.value.code == 2
    assert "the following arguments are required: spec, --dataset" in capsys.readouterr().err


def test_search_reads_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _file(tmp_path, "base: alter50-base\nsearch: [k, window]\ndry-run: true\n", "study.yaml")
    assert main(["search", "--config", "study.yaml", "--search", "k"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("base alter50-base: 4 stages, searching k\n")  # the file's base, the flag's knobs
    assert not (tmp_path / "runs").exists()


def test_the_help_explains_keys_and_precedence(capsys):
    for command in ("train", "search"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--config FILE.yaml" in text and "`batch_size: 64` or `batch-size: 64`" in text
        assert "Flags on the command line win over the file" in text


def test_only_train_and_search_read_a_file(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["check", "tiny", "--config", _file(tmp_path, "spec: tiny\n")])
    assert "unrecognized arguments: --config" in capsys.readouterr().err


def test_yaml_is_imported_only_for_a_config_file():
    code = (
        "import sys; from archdsl.cli import build_parser; "
        "build_parser().parse_args(['train', 'tiny', '--dataset', 'synthetic']); print('yaml' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.usefixtures("one_thread")
def test_a_run_records_the_settings_of_file_and_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    recipe = "opt: momentum\nsched_on_updates: false\ndecay-milestones: [1, 2]\nsched: multistep\nhflip: 0.25\n"
    _file(
        tmp_path,
        "spec: tiny\ndataset: 'synthetic:train=40,test=20'\nrecipe: fast\nepochs: 3\nbatch_size: 20\n" + recipe,
    )
    assert (
        main(["train", "--config", "run.yaml", "--epochs", "1", "--out", "run", "--no-progress", "--hflip", "0"]) == 0
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["recipe"], config["epochs"], config["batch_size"]) == ("fast", 1, 20)
    # Every recipe setting is a key; a switch of two flags (--sched-on-updates/--no-...) is true or false.
    assert (config["optimizer"], config["sched_on_updates"], config["decay_milestones"]) == ("momentum", False, [1, 2])
    assert (config["sched"], config["hflip"]) == ("multistep", 0.0)  # the command line wins over the file


def _alias_bomb() -> str:
    """Nine anchored lists, each of nine aliases of the one before: 300 bytes for 9**9 strings."""
    anchors, previous = ["&a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"], "a"
    for name in "bcdefghi":
        anchors.append(f"&{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
        previous = name
    return "[" + ", ".join(anchors) + "]"


# The child's own peak: /proc's VmHWM belongs to the process's memory since its exec (ru_maxrss would
# start at the forking pytest process's peak, which Linux carries into the child).
PEAK_OF_THIS_PROCESS = (
    "def peak():\n"
    "    status = open('/proc/self/status').read()\n"
    "    return int(status.split('VmHWM:')[1].split()[0]) * 1024\n"
)


def _run_with_peak_memory(tmp_path: Path, argv: list[str]) -> tuple[int, str, int]:
    """(exit status, stderr, peak resident bytes) of `archdsl ARGV` in a child process whose address
    space is capped at 2 GiB, so a bomb fails fast (MemoryError) rather than filling the machine."""
    code = PEAK_OF_THIS_PROCESS + (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from archdsl.cli import main\n"
        "try:\n    status = main(sys.argv[1:])\n"
        "except SystemExit as exit:\n    status = exit.code\n"
        "print(peak())\n"
        "sys.exit(status)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    return result.returncode, result.stderr, int(result.stdout.split()[-1]) if result.stdout.split() else 1 << 40


@pytest.mark.parametrize(
    "key_and_value",
    [
        "resume: {bomb}",  # a switch: its error message formats the value
        "out: {{a: {bomb}}}",  # inside a mapping
        "search: {bomb}",  # a list flag: its items are joined
    ],
)
def test_an_alias_bomb_is_refused_before_it_expands(tmp_path, key_and_value):
    text = key_and_value.format(bomb=_alias_bomb()) + "\n"
    assert len(text) < 700
    _file(tmp_path, text, "bomb.yaml")
    status, err, peak = _run_with_peak_memory(
        tmp_path, ["train", "tiny", "--dataset", "synthetic", "--config", "bomb.yaml", "--out", "new"]
    )
    assert (status, err.splitlines()[0]) == (
        2,
        "archdsl: error: bomb.yaml: too large for a settings file: its aliases expand to more than "
        "10,000 values or 1,000,000 characters",
    ), err
    assert peak < 1 << 30  # measured: about 35 MB
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("depth", [500, 100_000])
def test_deep_nesting_is_refused_with_its_line(tmp_path, capsys, depth):
    _file(tmp_path, "n_trials: 3\nsearch: " + "[" * depth + "]" * depth + "\n", "deep.yaml")
    assert main(["search", "--config", str(tmp_path / "deep.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err == f"archdsl: error: {tmp_path / 'deep.yaml'}:2: not valid YAML: nested deeper than 20 levels\n"


def test_aliases_within_the_bounds_still_work(tmp_path):
    config = _file(tmp_path, "search: &knobs [k, window]\nobjectives: [accuracy, params]\n")
    assert _parse(["search", "--config", config]).search == "k,window"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "epochs: 3\nout: " + "x" * 1_000_001 + "\n",
            "run.yaml:2: too large for a settings file: a key or value of 1,000,001 characters",
        ),
        (
            "? " + "k" * 1_000_001 + "\n: 3\n",
            "run.yaml:1: too large for a settings file: a key or value of 1,000,001 characters",
        ),
        ("".join(f"k{i}: {i}\n" for i in range(6000)), "run.yaml: too large for a settings file: 12,001 values"),
    ],
)
def test_a_large_file_without_aliases_is_not_blamed_on_aliases(tmp_path, capsys, text, said):
    (tmp_path / "run.yaml").write_text(text)
    assert main(["train", "tiny", "--dataset", "synthetic", "--config", str(tmp_path / "run.yaml")]) == 2
    err = capsys.readouterr().err
    assert said in err and "aliases" not in err, err[:300]
