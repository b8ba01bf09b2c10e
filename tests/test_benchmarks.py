"""benchmarks/gpu.sh keeps working: its CPU fallback runs the same steps as on a GPU, small."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None, reason="gpu.sh is a bash script")
def test_gpu_script_runs_its_cpu_fallback_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu.sh"), "--cpu", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout
    assert "device cpu, train-step batch 8" in table
    assert "bf16 + channels_last" in table and "tiny-basic" in table  # two variants, two models
    assert "archdsl train tiny, 1 epoch end to end" in table
    assert "archdsl analyze --metrics hessian (2 batches)" in table and "lanczos" in table
    assert "archdsl train tiny under torchrun" in table  # 2 CPU ranks, or skipped saying why
    assert (tmp_path / "train" / "final.safetensors").is_file() and (tmp_path / "analyze" / "report.md").is_file()


@pytest.mark.slow
def test_storage_load_benchmark_counts_every_trial_of_its_quick_cell(tmp_path: Path) -> None:
    # The journal cell only: the PostgreSQL and proxy cells need a server and grpcio (run by hand).
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "storage_load.py"), "--quick", "--backends", "journal",
         "--json", str(tmp_path / "load.json")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| journal | 4 | 20/20 |" in done.stdout
    (cell,) = json.loads((tmp_path / "load.json").read_text())
    assert (cell["lost"], cell["duplicated"], cell["orphans"], cell["gave_up"]) == (0, 0, 0, 0)
