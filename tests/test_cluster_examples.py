"""The cluster examples (examples/cluster/, explained in docs/storage.md) checked as far as one
machine allows: the SLURM script's #SBATCH lines parsed and checked (there is no `sbatch
--test-only` here), the Kubernetes manifest validated against a vendored subset of the
Kubernetes API schema (and the checks across fields the API server makes), and the commands
both run, as written, on this machine with tiny settings appended (the last flag wins).

The stand-ins: `srun` runs its command here; `torchrun` is either torch's own launcher
(`python -m torch.distributed.run`, 2 CPU ranks) or, for one process, drops its options and runs
the module. A torchrun group is one worker of the study (archdsl.search.fidelity.distributed): rank 0
samples and reports, and every rank trains the design rank 0 sends. What is checked here (the
command starts, every design is measured once, nothing is left running) holds for both launchers.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import _search_support as support
import pytest
import yaml
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parent.parent
SBATCH = ROOT / "examples" / "cluster" / "search.sbatch"
MANIFEST = ROOT / "examples" / "cluster" / "search-job.yaml"
SCHEMA = Path(__file__).parent / "fixtures" / "kubernetes" / "schema.json"


def _tiny_flags(tmp_path: Path, n_trials: int) -> list[str]:
    """Flags that make the examples' search a few seconds on a CPU (appended: they win)."""
    base = support.write_base(tmp_path)
    return [
        *("--dataset", support.DATASET, "--data-root", str(tmp_path / "data"), "--base", str(base)),
        *("--search", "k", "--strategy", "random", "--n-trials", str(n_trials), "--epochs", "1", "--subset", "1"),
        *("--val-subset", "1", "--batch-size", "32", "--device", "cpu", "--heartbeat", "1", "--grace-period", "30"),
    ]


def _stand_ins(tmp_path: Path, torchrun: str) -> dict[str, str]:
    """An environment whose PATH has `srun` and `torchrun` stand-ins (torchrun: "ranks" or "one")."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    scripts = {
        # srun: its own options (--ntasks=1) dropped, the command run here.
        "srun": 'while [ $# -gt 0 ]; do case "$1" in --*) shift;; *) break;; esac; done\nexec "$@"\n',
        "torchrun": (
            f'exec "{sys.executable}" -m torch.distributed.run "$@"\n'
            if torchrun == "ranks"
            else f'while [ $# -gt 0 ] && [ "$1" != -m ]; do shift; done\nexec "{sys.executable}" "$@"\n'
        ),
        "archdsl": f'exec "{sys.executable}" -m archdsl "$@"\n',
    }
    for name, body in scripts.items():
        path = folder / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return dict(os.environ, PATH=f"{folder}:{os.environ['PATH']}", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")


def _check_study(tmp_path: Path, study_name: str, url: str, n_trials: int) -> None:
    trials = support.load(tmp_path, study_name, url).trials
    measured = [t for t in trials if "copy_of" not in t.user_attrs]
    digests = [t.user_attrs["digest"] for t in measured]
    assert all(t.state == TrialState.COMPLETE for t in measured), [t.state for t in measured]
    assert len(set(digests)) == len(digests) >= n_trials, "a design was measured twice, or too few"


# -- SLURM --------------------------------------------------------------------------------

# The sbatch options the script may use, each with the form of its value (sbatch(1)).
SBATCH_OPTIONS = {
    "job-name": r"[\w.-]+",
    "array": r"\d+(-\d+)?(:\d+)?(,\d+(-\d+)?)*(%\d+)?",
    "nodes": r"\d+(-\d+)?",
    "ntasks-per-node": r"\d+",
    "gpus-per-node": r"(\w+:)?\d+",
    "cpus-per-task": r"\d+",
    "mem": r"\d+[KMGT]?",
    "time": r"(\d+-)?\d+(:\d{2}){0,2}",
    "output": r"[\w./%-]+",
    "signal": r"(B:|R:)?\w+(@\d+)?",
    "partition": r"[\w,-]+",
    "account": r"[\w-]+",
}


def _sbatch_directives() -> list[tuple[str, str]]:
    """The #SBATCH lines as sbatch reads them: up to the first command (later ones are ignored)."""
    directives = []
    for line in SBATCH.read_text().splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        if stripped.startswith("#SBATCH"):
            match = re.fullmatch(r"#SBATCH\s+--([\w-]+)=(\S+)(\s+#.*)?", stripped)
            assert match, f"not an `#SBATCH --option=value` line: {line!r}"
            directives.append((match.group(1), match.group(2)))
    return directives


def test_the_sbatch_directives_are_options_sbatch_knows_with_values_of_their_form():
    directives = _sbatch_directives()
    assert {name for name, _ in directives} >= {"array", "nodes", "ntasks-per-node", "gpus-per-node", "time"}
    for name, value in directives:
        assert name in SBATCH_OPTIONS, f"#SBATCH --{name}: not an option this test knows"
        assert re.fullmatch(SBATCH_OPTIONS[name], value), f"#SBATCH --{name}={value}: not of the form sbatch reads"
    text = SBATCH.read_text()
    after = text[text.index("set -euo pipefail") :]
    assert "#SBATCH" not in after, "an #SBATCH line after the first command is ignored by sbatch"
    # One torchrun launcher per node (one task), each with one rank per GPU of that node.
    assert dict(directives)["ntasks-per-node"] == "1" and dict(directives)["nodes"] == "1"
    assert re.search(r'--nproc-per-node="\$ranks"', text) and 'ranks="${SLURM_GPUS_ON_NODE' in text


def test_the_slurm_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)


def _run_sbatch_tasks(tmp_path: Path, torchrun: str, tasks: int, ranks: int, n_trials: int) -> str:
    """The script itself, as `tasks` array tasks of one node with `ranks` GPUs; the study's storage URL."""
    journal = tmp_path / "study.journal"
    env = _stand_ins(tmp_path, torchrun)
    env.update(
        ARCHDSL_STORAGE=f"journal:{journal}",
        ARCHDSL_STUDY="cluster",
        ARCHDSL_OUT=str(tmp_path / "runs"),
        ARCHDSL_SEARCH_FLAGS=shlex.join(_tiny_flags(tmp_path, n_trials)),
        SLURM_GPUS_ON_NODE=str(ranks),
    )
    workers = [
        subprocess.Popen(
            ["bash", str(SBATCH)],
            env={**env, "SLURM_ARRAY_TASK_ID": str(i)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(tasks)
    ]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    assert [w.returncode for w in workers] == [0] * tasks, outputs
    return f"journal:{journal}"


@pytest.mark.slow
def test_two_array_tasks_of_the_slurm_script_share_one_study(tmp_path):
    url = _run_sbatch_tasks(tmp_path, torchrun="one", tasks=2, ranks=1, n_trials=3)
    _check_study(tmp_path, "cluster", url, 3)


@pytest.mark.slow
def test_the_slurm_scripts_torchrun_group_runs_with_two_cpu_ranks(tmp_path):
    url = _run_sbatch_tasks(tmp_path, torchrun="ranks", tasks=1, ranks=2, n_trials=2)
    _check_study(tmp_path, "cluster", url, 2)


# -- Kubernetes ---------------------------------------------------------------------------


def _documents() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def _container(doc: dict) -> dict:
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    return container


def _env(container: dict) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def _schema_of(schema: dict, doc: dict) -> dict:
    """The vendored schema, rooted at the definition of the document's kind."""
    assert doc.get("kind") in schema["$defs"], f"no schema for kind {doc.get('kind')!r}"
    return {**schema, "$ref": f"#/$defs/{doc['kind']}"}


def test_the_manifest_validates_against_the_kubernetes_schema():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (the `dev` extra)")
    schema = json.loads(SCHEMA.read_text())
    documents = list(yaml.safe_load_all(MANIFEST.read_text()))
    assert [d["kind"] for d in documents] == ["Deployment", "Service", "Job"]
    for doc in documents:
        jsonschema.validate(doc, _schema_of(schema, doc))  # raises, naming the path of the first wrong field


def test_the_manifest_validation_catches_a_misspelt_field():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (the `dev` extra)")
    schema = json.loads(SCHEMA.read_text())
    job = _documents()["Job"]
    job["spec"]["completionsMode"] = job["spec"].pop("completionMode")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(job, _schema_of(schema, job))


def test_the_manifest_holds_together_as_the_api_server_checks_it():
    docs = _documents()
    job, deployment, service = docs["Job"], docs["Deployment"], docs["Service"]
    pod = job["spec"]["template"]["spec"]
    # An Indexed Job with a per-index backoff needs restartPolicy Never (batch/v1 validation).
    assert job["spec"]["completionMode"] == "Indexed" and pod["restartPolicy"] == "Never"
    assert job["spec"]["completions"] >= job["spec"]["parallelism"] > 0
    # The Deployment selects its own pods, and the Service reaches them on a named container port.
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    port_names = {p["name"]: p["containerPort"] for p in _container(deployment)["ports"]}
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] in port_names
    # The workers' storage is that Service, on its port, and the proxy listens on that port.
    worker = _container(job)
    storage = _env(worker)["ARCHDSL_STORAGE"]
    assert storage and storage.startswith(f"grpc://{service['metadata']['name']}:{service_port['port']}")
    proxy_command = _container(deployment)["command"]
    assert proxy_command[proxy_command.index("--port") + 1] == str(port_names[service_port["targetPort"]])
    # One rank per GPU, and every $(VAR) a command names is defined in its container.
    assert int(_env(worker)["RANKS"]) == worker["resources"]["limits"]["nvidia.com/gpu"]
    for container in (worker, _container(deployment)):
        defined = {e["name"] for e in container.get("env", [])}
        for word in container["command"]:
            assert set(re.findall(r"\$\((\w+)\)", word)) <= defined, word


def _expand(words: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion in a command."""
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], w) for w in words]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.skipif(
    __import__("importlib").util.find_spec("grpc") is None, reason="grpcio is not installed (the `distributed` extra)"
)
@pytest.mark.parametrize("torchrun", ["one", "ranks"])
def test_the_manifests_worker_and_proxy_commands_run_here(tmp_path, torchrun):
    docs = _documents()
    env = _stand_ins(tmp_path, torchrun)
    # The proxy as the Deployment starts it, on 127.0.0.1 and a free port instead of 0.0.0.0:13000,
    # in front of a journal instead of the Secret's database.
    proxy_command = _expand(_container(docs["Deployment"])["command"], {"DATABASE_URL": f"journal:{tmp_path / 'j'}"})
    proxy_command[proxy_command.index("--host") + 1] = "127.0.0.1"
    proxy_command[proxy_command.index("--port") + 1] = "0"
    proxy = subprocess.Popen(proxy_command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = support.read_line(proxy)
        url = re.search(r"grpc://127\.0\.0\.1:\d+", line)
        assert url, line + proxy.communicate(timeout=10)[0] if proxy.poll() is not None else line
        worker = _container(docs["Job"])
        values = {**_env(worker), "ARCHDSL_STORAGE": url.group(0), "RANKS": "2" if torchrun == "ranks" else "1"}
        command = _expand(worker["command"], values) + _tiny_flags(tmp_path, 2) + ["--out", str(tmp_path / "runs")]
        study_name = next(w.split("=", 1)[1] for w in command if w.startswith("--study-name="))
        done = subprocess.run(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300
        )
        assert done.returncode == 0, done.stdout
    finally:
        proxy.terminate()
        proxy.communicate(timeout=30)
    _check_study(tmp_path, study_name, f"journal:{tmp_path / 'j'}", 2)
