"""Fuzzed inputs of the integer-release (binomial, multinomial, poisson with discrete noise) and small-area
surfaces: each input, its exit code or exception type, and the field its one-line message names.  Every case
here was a silently dropped or changed datum, a traceback or a confusing refusal before its fix
(docs/reliability.md, "Checked before computing")."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import dpposterior as dp
from dpposterior.cli import main
from dpposterior.errors import CuratorWarning, InputError, RefusedError

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _refused(argv, capsys, field, out=None):
    code, stdout, err = _run(argv, capsys)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2, f"exit {code}, stderr {err!r}"
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {field}"), lines[0]
    if out is not None:
        assert not Path(out).exists()
    return lines[0]


def _csv(tmp_path, text, name="d.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------ missing values
@pytest.mark.parametrize("family,args,text,field", [
    ("binomial", ["--column", "x"], "x\n1\n\n0\n1\n", "data.x: row 2 is empty"),          # a blank line
    ("binomial", ["--column", "x"], "x,y\n1,2\n,3\n0,4\n", "data.x: row 2 is empty"),
    ("multinomial", ["--column", "c"], "c\na\n\nb\na\n", "data.c: row 2 is empty"),
    ("poisson", ["--column", "x", "--bounds", "0", "10"], "x\n1\n2\n \n", "data.x: row 3 is empty"),
])
def test_a_row_with_a_missing_value_is_refused_naming_row_and_column(family, args, text, field, tmp_path, capsys):
    out = tmp_path / "r.json"
    line = _refused(["release", _csv(tmp_path, text), "--family", family, "--epsilon", "1", "--out", out, *args],
                    capsys, field, out)
    assert "--drop-missing" in line


def test_drop_missing_leaves_the_rows_out_says_how_many_and_n_counts_the_rest(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err = _run(["release", _csv(tmp_path, "x\n1\n\n0\n1\n\n"), "--family", "binomial", "--column", "x",
                         "--epsilon", "1", "--seed", "3", "--drop-missing", "--out", out], capsys)
    assert code == 0, err
    assert "warning: --drop-missing: 2 rows with a missing value left out; n = 3" in err
    release = json.loads(out.read_text())
    assert release["n"] == 3 and "--drop-missing" in release["description"]
    assert "2 rows" not in release["description"]  # the count of missing rows is not released


def test_drop_missing_in_python_warns_and_an_unused_column_is_not_read(tmp_path):
    from dpposterior.curator import CurateOptions, build_release

    data = _csv(tmp_path, "c,other\na,\n,1\nb,2\na,3\n")
    with pytest.warns(CuratorWarning, match="1 row with a missing value left out; n = 3"):
        rel = build_release(data, CurateOptions("multinomial", epsilon=1.0, column="c", seed=1, drop_missing=True,
                                                extra={"categories": ["a", "b"]}))
    assert rel.n == 3  # the empty cell of 'other' (not read) kept row 1


def test_a_header_with_spaces_names_its_columns(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err = _run(["release", _csv(tmp_path, " age , ok\n1,0\n0,1\n"), "--family", "binomial", "--column",
                         "ok", "--epsilon", "1", "--seed", "1", "--out", out], capsys)
    assert code == 0, err


# ------------------------------------------------------------------------------ mechanism names
def test_mechanism_names_are_case_insensitive_and_a_typo_blames_mechanism(tmp_path, capsys):
    data, out = _csv(tmp_path, "x\n1\n0\n1\n"), tmp_path / "r.json"
    base = ["release", data, "--family", "binomial", "--column", "x", "--rho", "0.5", "--seed", "1", "--out", out]
    code, _, err = _run([*base, "--mechanism", "DISCRETE-GAUSSIAN"], capsys)
    assert code == 0, err
    assert json.loads(out.read_text())["statistics"]["successes"]["mechanism"] == "discrete-gaussian"
    out.unlink()
    line = _refused([*base, "--mechanism", "discrete-gausian"], capsys, "mechanism: 'discrete-gausian'", out)
    assert "discrete-gaussian" in line  # the valid choices


# ------------------------------------------------------------------------------ small-area curator
def _small_area(tmp_path, capsys, text, *extra, code=0):
    out = tmp_path / "r.json"
    argv = ["release", _csv(tmp_path, text), "--family", "small-area", "--area-column", "area", "--cell-column",
            "cell", "--mechanism", "discrete-gaussian", "--rho", "1", "--seed", "1", "--out", out, *extra]
    got, _, err = _run(argv, capsys)
    assert got == code, err
    return (json.loads(out.read_text()) if code == 0 else None), err


def test_small_area_keeps_the_exposure_files_areas_without_records(tmp_path, capsys):
    exposure = _csv(tmp_path, "area,exposure\nA,10\nB,20\nC,5\n", "e.csv")
    cells = _csv(tmp_path, "x\ny\n", "cells.txt")
    rel, err = _small_area(tmp_path, capsys, "area,cell\nA,x\nB,y\n", "--exposure", exposure, "--cells", cells)
    assert rel["areas"] == ["A", "B", "C"] and rel["cells"] == ["x", "y"]  # C: no record, released 0 + noise
    assert rel["exposure"] == [10.0, 20.0, 5.0] and "warning" not in err


def test_small_area_areas_file_and_lists_read_from_the_data_warn(tmp_path, capsys):
    areas = _csv(tmp_path, "A\nB\nD\n", "areas.txt")
    rel, err = _small_area(tmp_path, capsys, "area,cell\nA,x\nB,y\n", "--areas", areas)
    assert rel["areas"] == ["A", "B", "D"]
    assert "warning: the cells were read from the confidential data" in err and "--cells FILE" in err
    assert "cells were read from the confidential data" in rel["statistics"]["counts"]["note"]


def test_small_area_empty_area_is_refused_not_a_type_error(tmp_path, capsys):
    _, err = _small_area(tmp_path, capsys, "area,cell\nA,x\n,y\nB,x\n", code=2)
    assert err.startswith("error: data.area: row 2 is empty (column 'area')") and "Traceback" not in err
    rel, _ = _small_area(tmp_path, capsys, "area,cell\n1,x\n,y\n2,x\n", "--drop-missing")
    assert rel["areas"] == ["1", "2"]  # whole-number ids stay whole after the drop


def test_small_area_areas_file_errors(tmp_path, capsys):
    twice = _csv(tmp_path, "A\nB\nA\n", "areas.txt")
    _, err = _small_area(tmp_path, capsys, "area,cell\nA,x\n", "--areas", twice, code=2)
    assert err.startswith("error: areas: area 'A' appears twice")
    unknown = _csv(tmp_path, "A\n", "a1.txt")
    _, err = _small_area(tmp_path, capsys, "area,cell\nA,x\nB,x\n", "--areas", unknown, code=2)
    assert err.startswith("error: area-column: area 'B' is not among the declared areas")


# ------------------------------------------------------------------------------ read_measurements
MEAS = "area,cell,noisy_value,noise_variance\nA,x,12,4.0\nA,y,3,4.0\nB,x,-1,4.0\nB,y,25,4.0\n"


@pytest.mark.parametrize("text,kwargs,field", [
    (MEAS.replace(",12,", ",14.5,"), {}, "measurements.noisy_value: row 1: 14.5 is not an integer"),
    (MEAS.replace(",12,", ",1e30,"), {}, "measurements.noisy_value: row 1: 1e+30 is beyond 2^53"),
    (MEAS.replace(",12,", ",,"), {}, "measurements.noisy_value: row 1 is empty"),
    (MEAS.replace("3,4.0", "3,four"), {}, "measurements.noise_variance: row 2: 'four' is not a finite number"),
    (MEAS, {"exposure": {"A": 10}}, "exposure: no entry for area 'B'"),
    (MEAS, {"parents": {"B": "p"}}, "parents: no entry for area 'A'"),
    (MEAS, {"exposure": [10, 20]}, "exposure: must be a dict"),
    (MEAS, {"exposure": {"A": 1e-300, "B": 1}}, "release: exposure: 1e-300 is below 1e-30"),
])
def test_read_measurements_refuses_in_one_line(text, kwargs, field, tmp_path):
    path = _csv(tmp_path, text, "m.csv")
    from dpposterior.families.small_area import read_measurements

    with pytest.raises(InputError) as err:
        dp.load_release(read_measurements(path, **kwargs))
    assert str(err.value).startswith(field) and "\n" not in str(err.value), str(err.value)


def test_read_measurements_missing_file(tmp_path):
    from dpposterior.families.small_area import read_measurements

    with pytest.raises(InputError, match=r"^measurements: file not found: "):
        read_measurements(tmp_path / "absent.csv")


# ------------------------------------------------------------------------------ sigma and the constructors
@pytest.mark.parametrize("sigma,field", [("2", "sigma: must be a number (got str '2')"),
                                         (1e-300, "sigma: 1e-300 is outside [1e-06, 1e+15]"),
                                         (1e308, "sigma: 1e+308 is outside [1e-06, 1e+15]"),
                                         (True, "sigma: must be a number")])
def test_discrete_gaussian_constructor_refuses_in_one_line(sigma, field):
    from dpposterior.mechanisms import DiscreteGaussian

    with pytest.raises(InputError) as err:
        DiscreteGaussian(sigma)
    assert str(err.value).startswith(field), str(err.value)


@pytest.mark.parametrize("epsilon,field", [("1", "epsilon: must be a number"),
                                           (1e-300, "epsilon: 1e-300 gives a noise scale")])
def test_discrete_laplace_constructor_refuses_in_one_line(epsilon, field):
    from dpposterior.mechanisms.discrete_laplace import DiscreteLaplace

    with pytest.raises(InputError) as err:
        DiscreteLaplace(epsilon)
    assert str(err.value).startswith(field), str(err.value)


@pytest.mark.parametrize("release,field", [
    ({"format": "dpposterior-release/1", "family": "binomial", "n": 100,
      "statistics": {"successes": {"value": 50, "mechanism": "discrete-gaussian", "sigma": 1e308}}}, "sigma: 1e+308"),
    ({"format": "dpposterior-release/1", "family": "small-area", "areas": ["a", "b"], "cells": ["x"],
      "statistics": {"counts": {"value": [[1], [2]], "mechanism": "discrete-gaussian", "sigma": 1e308}}},
     "release: statistics.counts.sigma: 1e+308 is outside"),
    ({"format": "dpposterior-release/1", "family": "small-area", "areas": ["a", "b"], "cells": ["x"],
      "statistics": {"counts": {"value": [[1], [1e30]], "mechanism": "discrete-gaussian", "sigma": 2.0}}},
     "release: statistics.counts.value: 1e+30 is beyond 2^53"),
])
def test_release_sigma_and_counts_out_of_range_are_one_line(release, field, tmp_path, capsys):
    path = tmp_path / "rel.json"
    path.write_text(json.dumps(release))
    line = _refused(["infer", path, "--out", tmp_path / "p.nc"], capsys, "", tmp_path / "p.nc")
    assert field in line, line


def test_sensitivity_refusal_prints_every_digit():
    release = {"format": "dpposterior-release/1", "family": "multinomial", "n": 10, "categories": ["a", "b"],
               "statistics": {"counts": {"value": [5, 5], "mechanism": "discrete-gaussian", "sigma": 2.0,
                                         "sensitivity": 1.41421}}}
    with pytest.raises(InputError, match=r"1\.41421 is smaller than the replace-one sensitivity 1\.4142135623730951"):
        dp.load_release(release)
    release["statistics"]["counts"]["sensitivity"] = 1.4142135623730951
    assert dp.load_release(release).statistics.counts.sensitivity == pytest.approx(2 ** 0.5)


def test_numpy_scalars_are_shown_as_plain_numbers():
    from dpposterior.errors import check_seed

    with pytest.raises(InputError, match=r"\(got -1\)$"):
        check_seed(np.int64(-1))
    with pytest.raises(InputError, match=r"^draws: must be an integer >= 1 \(got 0\)$"):
        dp.infer({"format": "dpposterior-release/1", "family": "binomial", "n": 10,
                  "statistics": {"successes": {"value": 3, "mechanism": "laplace", "epsilon": 1.0}}},
                 draws=np.int64(0))


# ------------------------------------------------------------------------------ an optional package missing
def test_sppe_without_torch_is_one_line(tmp_path):
    release = Path(__file__).resolve().parents[1] / "examples" / "releases" / "sir-eps10.json"
    code = ("import sys; sys.modules['torch'] = None\n"
            "from dpposterior.cli import main\n"
            f"sys.exit(main(['infer', {str(release)!r}, '--method', 'sppe', '--out', {str(tmp_path / 'p.nc')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith("error: method: this engine (sppe) needs the optional package 'torch'")
    assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0


# ------------------------------------------------------------------------------ memory, refused before allocating
@pytest.fixture
def eight_gib(monkeypatch):
    import dpposterior.memory as memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 8.0 * 2 ** 30)


def test_small_area_draws_of_200000_areas_are_refused_before_sampling(eight_gib, tmp_path, capsys):
    G = 200_000
    release = {"format": "dpposterior-release/1", "family": "small-area", "areas": [f"a{g}" for g in range(G)],
               "cells": ["x"], "statistics": {"counts": {"value": [[3]] * G, "mechanism": "discrete-gaussian",
                                                         "sigma": 2.0}}}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(release))
    line = _refused(["infer", path, "--out", tmp_path / "p.nc"], capsys, "draws: exact-da: 5000 draws x 4 chains "
                    "of 200000 areas", tmp_path / "p.nc")
    assert "needs about 37.3 GiB" in line and "more than the 8.0 GiB available" in line
    assert "draws per chain fit (--draws " in line


def test_small_area_window_of_sigma_1e9_is_refused_before_allocating(eight_gib):
    release = {"format": "dpposterior-release/1", "family": "small-area", "areas": ["a", "b"], "cells": ["x"],
               "statistics": {"counts": {"value": [[3], [4]], "mechanism": "discrete-gaussian", "sigma": 1e9}}}
    from dpposterior.families.small_area import SmallAreaPrior
    from dpposterior.inference.small_area import SmallAreaOptions, exact_da
    from dpposterior.options import InferenceOptions

    with pytest.raises(RefusedError, match=r"^draws: exact-da: .*enumeration windows [0-9.]+ GiB.* too wide"):
        exact_da(dp.load_release(release).observation_model(SmallAreaPrior()),
                 SmallAreaOptions.from_inference(InferenceOptions(draws=100, chains=4, seed=1)))


def test_binomial_window_of_sigma_1e8_is_refused_before_allocating(eight_gib):
    from dpposterior.families._expfam import parse_beta_prior
    from dpposterior.inference.exact_counts import ExactOptions, exact
    from dpposterior.options import InferenceOptions

    release = dp.load_release({"format": "dpposterior-release/1", "family": "binomial", "n": 2_000_000_000,
                               "statistics": {"successes": {"value": 10 ** 9, "mechanism": "discrete-gaussian",
                                                            "sigma": 1e8}}})
    with pytest.raises(RefusedError, match=r"^method: exact: the enumeration window .* needs about [0-9.]+ GiB"):
        exact(release.observation_model(parse_beta_prior(None)),
              ExactOptions.from_inference(InferenceOptions(draws=1000, chains=4, seed=1)))
