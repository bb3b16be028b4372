"""The curator in Python (``dpposterior.release_from_csv``, ``dpposterior.release_from_measurements``) and
``dpposterior release --from-measurements``: the same release as the command line, the same refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import dpposterior
from dpposterior.cli import main
from dpposterior.errors import InputError


def _release_json(path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture
def records(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": (rng.random(80) < 0.3).astype(int), "colour": rng.choice(["red", "blue", "green"], 80),
                          "visits": rng.poisson(2.0, 80), "lead": np.clip(rng.normal(30, 10, 80), 0, 100)})
    path = tmp_path / "records.csv"
    frame.to_csv(path, index=False)
    return path, frame


@pytest.mark.parametrize("argv,keywords", [
    (["--family", "binomial", "--column", "x", "--mechanism", "discrete-gaussian", "--rho", "0.5"],
     dict(family="binomial", column="x", mechanism="discrete-gaussian", rho=0.5)),
    (["--family", "gaussian", "--column", "lead", "--bounds", "0", "100", "--epsilon", "1"],
     dict(family="gaussian", column="lead", bounds=[0, 100], epsilon=1.0)),
    (["--family", "poisson", "--column", "visits", "--bounds", "0", "6", "--target-epsilon", "0.8"],
     dict(family="poisson", column="visits", bounds=(0, 6), target_epsilon=0.8)),
    (["--family", "naive-bayes", "--columns", "x,colour", "--epsilon", "1"],
     dict(family="naive-bayes", columns="x,colour", epsilon=1.0)),
])
def test_release_from_csv_writes_what_the_command_writes(records, tmp_path, argv, keywords, capsys):
    path, frame = records
    assert main(["release", str(path), *argv, "--seed", "7", "--out", str(tmp_path / "cli.json")]) == 0
    capsys.readouterr()
    release = dpposterior.release_from_csv(path, **keywords, seed=7, out=tmp_path / "py.json")
    assert _release_json(tmp_path / "py.json") == _release_json(tmp_path / "cli.json")
    assert json.loads(release.to_json()) == _release_json(tmp_path / "cli.json")
    # a DataFrame in memory: the same release, and the caller's frame is left as it was
    before = frame.copy()
    from_frame = dpposterior.release_from_csv(frame, **keywords, seed=7)
    assert json.loads(from_frame.to_json()) == _release_json(tmp_path / "cli.json")
    pd.testing.assert_frame_equal(frame, before)


def test_release_from_csv_takes_extra_options(records):
    _, frame = records
    release = dpposterior.release_from_csv(frame, family="multinomial", column="colour", epsilon=1.0, seed=1,
                                           extra={"categories": ["blue", "green", "red", "violet"]})
    assert release.categories == ["blue", "green", "red", "violet"]


@pytest.mark.parametrize("keywords,message", [
    (dict(family="binomial", column="x", epsilon=1.0, bounds=(0, 1)), "^bounds: not an option of the binomial curator"),
    (dict(family="binomial", column="x", epsilon=1.0, colum="x"), "^colum: not an option of the binomial curator"),
    (dict(family="binomial", column="x", mechanism="discrete-gaussian", epsilon=1.0), "^epsilon: not a budget"),
    (dict(family="binomial", column="x"), "^epsilon: is required"),
    (dict(family="binomial", column="x", epsilon=1.0, rho=0.5), "^rho: is the budget of --mechanism discrete"),
    (dict(family="nope", column="x", epsilon=1.0), "^family: unknown family 'nope'"),
])
def test_release_from_csv_refuses_in_one_line(records, keywords, message):
    _, frame = records
    with pytest.raises(InputError, match=message) as err:
        dpposterior.release_from_csv(frame, **keywords)
    assert "\n" not in str(err.value)


def test_release_from_csv_checks_out_before_any_work(records, tmp_path):
    path, _ = records
    with pytest.raises(InputError, match="^out: "):
        dpposterior.release_from_csv(path, family="binomial", column="x", epsilon=1.0, out=tmp_path / "no" / "r.json")


def test_a_data_frame_with_a_column_twice_is_refused():
    frame = pd.DataFrame([[1, 0]], columns=["x", " x"])
    with pytest.raises(InputError, match="^data: column 'x' appears twice"):
        dpposterior.release_from_csv(frame, family="binomial", column="x", epsilon=1.0)


# --------------------------------------------------------------------------- --from-measurements
MEASUREMENTS = """area,cell,noisy_value,noise_variance
A,under 18,14,4.0
A,18 and over,51,4.0
B,under 18,-2,4.0
B,18 and over,9,4.0
"""


@pytest.fixture
def measurements(tmp_path):
    path = tmp_path / "measurements.csv"
    path.write_text(MEASUREMENTS)
    (tmp_path / "exposure.csv").write_text("area,exposure\nA,480\nB,35\n")
    return path


def test_release_from_measurements_adds_no_noise(measurements, tmp_path, capsys):
    out = tmp_path / "table.json"
    code = main(["release", "--from-measurements", str(measurements), "--family", "small-area", "--exposure",
                 str(tmp_path / "exposure.csv"), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "family small-area, total rho 0.25 (zCDP)" in captured.out
    assert captured.err.startswith("note: no noise was added")
    data = _release_json(out)
    assert data["statistics"]["counts"]["value"] == [[14, 51], [-2, 9]]  # as read: no noise added
    assert data["exposure"] == [480.0, 35.0] and data["areas"] == ["A", "B"]
    assert "no noise was added" in data["description"]
    release = dpposterior.load_release(out)
    assert release.privacy().rho == pytest.approx(0.25)  # sigma 2 on every cell: the worst pair's 1/sigma^2
    assert data["accounting"]["rho"] == pytest.approx(0.25)
    same = dpposterior.release_from_measurements(measurements, exposure={"A": 480, "B": 35})
    assert json.loads(same.to_json()) == data


@pytest.mark.parametrize("extra,message", [
    (["DATA.csv"], "error: from-measurements: takes no data CSV"),
    (["--epsilon", "1"], "error: epsilon: not an option of --from-measurements (the measurements are already noisy"),
    (["--rho", "0.5"], "error: rho: not an option of --from-measurements"),
    (["--target-rho", "0.5"], "error: target-rho: not an option of --from-measurements"),
    (["--seed", "1"], "error: seed: not an option of --from-measurements"),
    (["--area-column", "county"], "error: area-column: not an option of --from-measurements (it takes --exposure"),
    (["--mechanism", "discrete-laplace"], "error: mechanism: long-format measurements carry a noise variance"),
])
def test_from_measurements_refusals_are_one_line(measurements, tmp_path, extra, message, capsys):
    argv = ["release", "--from-measurements", str(measurements), "--family", "small-area",
            "--out", str(tmp_path / "t.json"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / "t.json").exists()


def test_from_measurements_is_for_small_area_only(measurements, tmp_path, capsys):
    assert main(["release", "--from-measurements", str(measurements), "--family", "binomial",
                 "--out", str(tmp_path / "t.json")]) == 2
    assert capsys.readouterr().err == ("error: family: measurement tables are read for family small-area only "
                                       "(got 'binomial')\n")


def test_release_needs_data_or_measurements(tmp_path, capsys):
    assert main(["release", "--family", "binomial", "--epsilon", "1", "--out", str(tmp_path / "t.json")]) == 2
    assert capsys.readouterr().err.startswith("error: data: give the CSV of confidential records")


def test_release_from_measurements_reads_parents_from_a_csv_and_the_cli(tmp_path, capsys):
    """--parents FILE.csv (area, parent) gives the same release as the dict; a missing area, an empty parent, a
    duplicated area and --parents without --from-measurements are refused in one line."""
    from dpposterior.cli import main

    table = tmp_path / "m.csv"
    table.write_text("area,cell,noisy_value,noise_variance\nA,x,4,4.0\nA,y,7,4.0\nB,x,-1,4.0\nB,y,3,4.0\n")
    parents = tmp_path / "p.csv"
    parents.write_text("area,parent\nA,north\nB,south\n")
    by_dict = dpposterior.release_from_measurements(table, parents={"A": "north", "B": "south"})
    by_csv = dpposterior.release_from_measurements(table, parents=parents)
    assert by_csv.parents == by_dict.parents == ["north", "south"]
    assert main(["release", "--from-measurements", str(table), "--family", "small-area", "--parents", str(parents),
                 "--out", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["parents"] == ["north", "south"]
    capsys.readouterr()
    for text, message in (("area,parent\nA,north\n", "parents"), ("area,parent\nA,north\nB,\n", "row 2: the parent"),
                          ("area,parent\nA,n\nA,s\nB,s\n", "area 'A' appears twice")):
        parents.write_text(text)
        code = main(["release", "--from-measurements", str(table), "--family", "small-area", "--parents",
                     str(parents), "--out", str(tmp_path / "bad.json")])
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1, err
    code = main(["release", str(table), "--family", "small-area", "--parents", str(parents), "--out",
                 str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: parents: is read with --from-measurements only"), err
