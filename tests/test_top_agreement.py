"""benchmarks/top_agreement.py on tables whose order is known: a copy of the reference ranks its top as it does
(Kendall 1), a table that reverses the values ranks it backwards (Kendall -1), and `--within` picks the top."""

from __future__ import annotations

import pytest

from tests._replay_support import make_table, the_space
from tests.test_benchmarks import load_script


def reversed_values(table):
    """`table` with every validation figure mirrored around 0.8: the best design becomes the worst."""
    designs = [
        d.model_copy(update={"runs": [r.model_copy(update={"val_acc": 1.6 - r.val_acc}) for r in d.runs]})
        for d in table.designs
    ]
    return table.model_copy(update={"designs": designs})


@pytest.fixture(scope="module")
def reference():
    return make_table(the_space(("k",)), noise=0.001, seeds=(0, 1, 2, 3))


def kendall_cells(rows: list[str]) -> list[tuple[str, str]]:
    return [tuple(cell.strip() for cell in row.split("|")[4:6]) for row in rows[2:]]


def test_a_copy_of_the_reference_ranks_the_top_as_it_does_and_a_mirror_ranks_it_backwards(reference, monkeypatch):
    script = load_script("top_agreement", monkeypatch)
    head, rows = script.agreement_rows(reference, [("copy", reference), ("mirror", reversed_values(reference))], 5.0)
    assert kendall_cells(rows) == [("1.00", "1.00"), ("-1.00", "-1.00")]
    assert "(+0.00)" in rows[2] and "(+0.00)" not in rows[3]  # the mirror's best is the reference's worst
    assert "split-half Kendall on them: 1.00" in head  # noise that grows with the seed keeps each half's order


def test_within_picks_the_designs_near_the_reference_best(reference, monkeypatch):
    script = load_script("top_agreement", monkeypatch)
    everything = len(reference.designs)
    wide, _ = script.agreement_rows(reference, [("copy", reference)], 100.0)
    narrow, _ = script.agreement_rows(reference, [("copy", reference)], 2.5)
    assert f"the {everything} of {everything} designs" in wide
    assert f"of {everything} designs within 2.5 points" in narrow
    assert f"the {everything} of" not in narrow


def test_a_missing_table_ends_in_one_line(monkeypatch, tmp_path, capsys):
    script = load_script("top_agreement", monkeypatch)
    with pytest.raises(SystemExit) as stop:
        script.main(["--reference", str(tmp_path / "none.json"), "--table", str(tmp_path / "none.json")])
    assert str(stop.value).startswith("top_agreement: ") and "\n" not in str(stop.value)


def test_a_file_that_is_not_a_table_is_named_in_one_line(monkeypatch, tmp_path):
    script = load_script("top_agreement", monkeypatch)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(SystemExit) as stop:
        script.main(["--reference", str(broken), "--table", str(broken)])
    message = str(stop.value)
    assert str(broken) in message and "not a table" in message and "\n" not in message
