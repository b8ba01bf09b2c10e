"""benchmarks/fidelity_study.py on tables whose answers are known: an end-of-training reference where an MSA
in c2 or c3 helps (tests/_replay_support's rule), and a cheap fidelity biased against MSAs (each MSA costs it
points, as two epochs cost them on Fashion-MNIST), so that the study must find the bias, name the reference's
best, and tell the biased estimator's answers from right ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._replay_support import make_table, the_space, write_table
from tests.test_benchmarks import load_script

MSA_PENALTY = 0.03  # what one MSA costs the cheap fidelity: more than an MSA in c3 gains at the end


def biased(table, penalty: float, epochs: int, subset: float):
    """`table` as a cheaper fidelity would measure it: every value lowered by `penalty` per MSA, and a training
    loss whose sum ranks the designs as the lowered values do."""
    designs = []
    for d in table.designs:
        runs = []
        for r in d.runs:
            cost = penalty * d.n_msa
            curve = [
                p.model_copy(update={"val_acc": p.val_acc - cost, "train_loss": 1.0 - p.val_acc + cost})
                for p in r.curve
            ]
            runs.append(r.model_copy(update={"val_acc": r.val_acc - cost, "curve": curve}))
        designs.append(d.model_copy(update={"runs": runs}))
    return table.model_copy(update={"designs": designs, "fidelity": {"epochs": epochs, "subset": subset}})


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    space = the_space(("k",))
    folder = tmp_path_factory.mktemp("tables")
    reference = make_table(space, noise=0.002, seeds=(0, 1, 2, 3))
    reference = biased(reference, 0.0, epochs=12, subset=0.25)
    cheap = biased(make_table(space, noise=0.002, seeds=(0, 1, 2)), MSA_PENALTY, epochs=2, subset=0.1)
    return write_table(folder / "reference.json", reference), write_table(folder / "cheap.json", cheap)


def test_the_study_finds_the_bias_and_the_reference_best(tables, monkeypatch, tmp_path: Path) -> None:
    study = load_script("fidelity_study", monkeypatch)
    reference, cheap = tables
    summary = study.summarize(study.parse_args(["--reference", str(reference), "--cheap", str(cheap)]))

    # The rule's best: an MSA at the end of c2 and both of c3's (tests/_replay_support.STAGE_GAIN), none in c1.
    assert summary["reference_best"].startswith("c1:CC")
    assert summary["split_half_kendall"]["min"] > 0.9  # the seeds shift every design alike: they agree
    gaps = {d["n_msa"]: d["gap"] for d in summary["designs"]}
    assert gaps[0] == pytest.approx(0.0, abs=1e-9) and gaps[2] == pytest.approx(2 * MSA_PENALTY)

    # On the biased fidelity the walk keeps no MSA: its answer is the ResNet, which the reference beats.
    last = summary["estimators"]["last"]
    assert last["right"] == 0.0 and list(last["answers"]) == ["c1:CC c2:CC c3:CC"]
    assert last["kendall_with_reference"] < 0.8 * summary["split_half_kendall"]["mean"]


def test_the_markdown_and_figure_show_every_design(tables, monkeypatch, tmp_path: Path) -> None:
    study = load_script("fidelity_study", monkeypatch)
    reference, cheap = tables
    args = study.parse_args(["--reference", str(reference), "--cheap", str(cheap)])
    summary = study.summarize(args)
    text = study.markdown(summary)
    assert text.count("| `c1:") == len(summary["designs"]) and "(best)" in text
    (figure,) = study.figures(summary, tmp_path, "test-")
    assert figure.stat().st_size > 10_000
