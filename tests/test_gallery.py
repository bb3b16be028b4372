"""``dpposterior reproduce``: the gallery's registry, its one-line errors, the papers' numbers,
and (slow) every entry at default scale."""

from __future__ import annotations

import json
import sys

import pytest

from dpposterior import gallery
from dpposterior.cli import main
from dpposterior.errors import InputError

NAMES = ["kazan-example1", "kazan-coverage", "bernstein-calibration", "karwa-mse", "alparslan-simulated",
         "alparslan-uci", "xiong-linreg", "xiong-sir", "xiong-outbreaks", "small-area"]


def test_list_names_every_entry_with_run_time(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        line = next(l for l in out.splitlines() if l.startswith(name + " "))
        assert "~" in line  # an expected run time
    assert list(gallery.ENTRIES) == NAMES


@pytest.mark.parametrize("argv, field", [
    (["reproduce"], "name"),
    (["reproduce", "no-such-entry"], "name"),
    (["reproduce", "karwa-mse", "--scheduler", "mpi"], "scheduler"),
])
def test_bad_requests_are_one_line(argv, field, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:") and err.count("\n") == 1


@pytest.mark.parametrize("name, module", [
    ("xiong-sir", "dpposterior.families.sir"),
    ("karwa-mse", "dpposterior.families.naive_bayes"),
    ("bernstein-calibration", "dpposterior.diagnostics.calibration"),
    ("kazan-example1", "dpposterior.families.gaussian"),
])
def test_missing_engine_is_one_line_error(name, module, monkeypatch, capsys, tmp_path):
    # a None entry in sys.modules makes `import module` fail as if the engine were not installed
    monkeypatch.setitem(sys.modules, module, None)
    assert main(["reproduce", name, "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: engine:") and "not available" in err and err.count("\n") == 1


def test_paper_reference_numbers_are_consistent():
    uci = gallery.PAPER["alparslan-uci"]
    assert len(uci) == 9 and all(len(row) == 5 for row in uci.values())
    assert uci[(1, "PowerPlant")]["adassp"] == 0.0139 and uci[(10, "AirQuality")]["mcmc-normalx"] == 0.0985
    for eps, rows in gallery.PAPER["xiong-linreg"].items():
        for method, coefs in rows.items():
            assert len(coefs) == 3
            for mean, lo, hi in coefs:
                assert lo < mean < hi, (eps, method)
    for (var, constrained), (lo, hi) in gallery.PAPER["kazan-example1"].items():
        assert 0 < lo < hi


def test_markdown_table():
    md = gallery._markdown(["a", "b"], [[1, "x"], [2, "y"]])
    assert md.splitlines() == ["| a | b |", "|---|---|", "| 1 | x |", "| 2 | y |"]


def test_uci_preparation_follows_the_readme():
    if not (gallery.uci_data_dir() / "power_plant_energy.csv").exists():
        pytest.skip("UCI data not available")
    Xtr, ytr, Xte, yte = gallery.load_uci("PowerPlant")
    assert Xtr.shape == (7655, 4) and Xte.shape == (9568 - 7655, 4)
    assert max(abs(ytr).max(), abs(yte).max()) == pytest.approx(1.0)
    Xtr, ytr, Xte, yte = gallery.load_uci("AirQuality")
    assert Xtr.shape == (7486, 12) and len(ytr) + len(yte) == 9357


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_entry_runs_at_default_scale(name, tmp_path):
    assert main(["reproduce", name, "--out", str(tmp_path), "--quiet", "--scheduler", "processes"]) == 0
    folder = tmp_path / name
    assert (folder / "figure.png").stat().st_size > 10_000
    table = (folder / "table.md").read_text()
    assert table.count("|") > 10
    assert json.loads((folder / "result.json").read_text())["rows"]


def _square_unit(unit):
    return {"x": unit["x"], "y": unit["x"] ** 2}


def _toy_entry(ctx):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    units = [{"x": x} for x in range(5)]
    results = gallery._run_cells(ctx, _square_unit, units, "toy", "toy units")
    fig, ax = plt.subplots()
    ax.plot([r["x"] for r in results], [r["y"] for r in results])
    return gallery.Result(fig, ["x", "x^2 (ours)", "paper"], [[r["x"], r["y"], r["x"] ** 2] for r in results],
                          ["a note"], {"results": results})


def test_run_entry_writes_figure_table_json_and_cleans_its_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setitem(gallery.ENTRIES, "toy", gallery.Entry("toy", "Toy paper", "squares", "~1 s", "~1 s",
                                                              _toy_entry))
    folder = tmp_path / "toy"
    folder.mkdir()
    # a stale checkpoint from another version of the entry is replaced, not an error
    (folder / "checkpoint-default.json").write_text('{"fingerprint": {"other": 1}, "total": 2, "results": {}}')
    payload = gallery.run_entry("toy", tmp_path, scheduler="serial")
    assert payload["rows"][3] == ["3", "9", "9"]
    assert (folder / "figure.png").read_bytes()[:4] == b"\x89PNG"
    table = (folder / "table.md").read_text()
    assert "| x | x^2 (ours) | paper |" in table and "- a note" in table and "![figure](figure.png)" in table
    assert json.loads((folder / "result.json").read_text())["data"]["results"][2] == {"x": 2, "y": 4}
    assert not (folder / "checkpoint-default.json").exists()
    assert "## toy: Toy paper" in gallery.gallery_markdown(tmp_path, "gallery/")
