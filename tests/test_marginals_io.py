"""Readers of noisy marginals into a ``marginals`` release (src/dpposterior/marginals_io.py).

The OpenDP tests release REAL ``ContingencyTable``\\ s with ``make_contingency_table`` (through
``Context.query().contingency_table(...)``) on a seeded polars frame and check what is read against the data and
against OpenDP's own privacy map.

What OpenDP 0.16 does (``opendp/extras/mbi``) and how it maps to dpposterior's replace-one accounting:

* ``dp.unit_of(changes=1)`` is ``ChangeOneDistance``, d_in = 1: one record REPLACED by another -- dpposterior's
  neighbouring relation.  ``contingency_table`` turns it into ``FrameDistance<SymmetricDistance>`` with a
  symmetric distance of 2 (one record out, one in).  ``make_stable_marginals`` bounds a marginal's L2 change by
  min(l1, sqrt(l0) * linf) = min(2, sqrt(2) * 2) = 2: it does not use that the two changed records are one
  removal and one addition, so its L2 sensitivity of a marginal is 2 where the replace-one sensitivity is
  sqrt(2) (one cell -1, another +1).  Its L1 sensitivity, 2, is the replace-one one.
* Under zCDP each marginal gets discrete Gaussian N_Z(0, sigma^2) noise (``make_noise`` over i32 vectors),
  ``stddev`` = sigma, and OpenDP's rho = sum_m 2^2 / (2 sigma_m^2); dpposterior's replace-one rho is
  sum_m (sqrt 2)^2 / (2 sigma_m^2) = half of it.  Under max-divergence each marginal gets discrete Laplace noise
  of scale b (``stddev`` = b sqrt 2) and OpenDP's epsilon = sum_m 2 / b_m -- exactly dpposterior's.
* (``unit_of(contributions=1)``, add/remove-one, gives sensitivity 1: a table released that way has half the
  sigma for the same rho; read with these readers it is accounted under replace-one from its noise alone.)
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from dpposterior.errors import InputError
from dpposterior.marginals_io import (release_from_cliques_file, release_from_contingency_table,
                                      release_from_linear_measurements)

N = 2000
KEYS = {"a": ["x", "y", "z"], "b": ["F", "M"], "c": ["p", "q", "r", "s"]}
CLIQUES = [("a", "b", "c"), ("a", "b"), ("a", "c"), ("b", "c"), ("c",)]
#: |z| beyond which a noise statistic fails (two-sided ~7e-6 per check)
Z = 4.5


# --------------------------------------------------------------------------- OpenDP tables
def _frame():
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(20240611)
    a = rng.choice(KEYS["a"], N, p=[0.5, 0.3, 0.2])
    b = np.where(rng.random(N) < np.where(a == "x", 0.7, 0.4), "F", "M")
    c = rng.choice(KEYS["c"], N)
    return pl.DataFrame({"a": a, "b": b, "c": c})


def _fast_estimator(domain, loss_fn, *, potentials=None):
    from mbi.estimation import mirror_descent

    return mirror_descent(domain, loss_fn, potentials=potentials, iters=20)


def _release(loss: dict, algorithm):
    """(table, OpenDP's d_out for change-one d_in = 1, input metric, frame) of one real release."""
    pytest.importorskip("mbi")
    pytest.importorskip("polars")
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    frame = _frame()
    ctx = dp.Context.compositor(data=frame.lazy(), privacy_unit=dp.unit_of(changes=1),
                                privacy_loss=dp.loss_of(**loss), split_evenly_over=1)
    meas = ctx.query().contingency_table(keys=KEYS, algorithm=algorithm).resolve()
    d_out = meas.map(1)
    return meas(frame.lazy()), d_out, str(meas.input_metric), frame


@pytest.fixture(scope="module")
def zcdp():
    dp = pytest.importorskip("opendp.prelude")
    pytest.importorskip("mbi")
    algo = dp.mbi.Fixed(queries=[dp.mbi.Count(c) for c in CLIQUES], estimator=_fast_estimator)
    return _release({"rho": 0.5}, algo)


@pytest.fixture(scope="module")
def pure():
    dp = pytest.importorskip("opendp.prelude")
    pytest.importorskip("mbi")
    algo = dp.mbi.Fixed(queries=[dp.mbi.Count(c) for c in CLIQUES], estimator=_fast_estimator)
    return _release({"epsilon": 4.0}, algo)


def _true_table(frame, labels: dict, clique) -> np.ndarray:
    """The exact count table of ``clique``, coded by the release's labels (the null code gets no rows here)."""
    shape = tuple(len(labels[a]) for a in clique)
    out = np.zeros(shape, dtype=np.int64)
    codes = [np.array([labels[a].index(v) for v in frame[a].to_list()]) for a in clique]
    np.add.at(out, tuple(codes), 1)
    return out


def _noise(release, frame):
    """Every cell's noise (value - true count) and its measurement's record."""
    out = []
    for rec in release["measurements"]:
        value = np.asarray(rec["value"])
        assert value.dtype.kind == "i"
        out.append((value - _true_table(frame, release["labels"], rec["clique"]), rec))
    return out


def test_zcdp_table_reads_domain_labels_shapes_and_discrete_gaussian_noise(zcdp):
    table, rho, metric, frame = zcdp
    release = release_from_contingency_table(table, mechanism="discrete-gaussian", n=N)
    assert release["format"] == "dpposterior-release/1" and release["family"] == "marginals"
    assert release["n"] == N
    # OpenDP appends a null category to every keyset (the last code)
    assert release["domain"] == {"a": 4, "b": 3, "c": 5}
    assert release["labels"] == {a: [*KEYS[a], "null"] for a in KEYS}
    assert [tuple(r["clique"]) for r in release["measurements"]] == CLIQUES
    sigmas = set()
    noise = []
    for diff, rec in _noise(release, frame):
        assert diff.shape == tuple(release["domain"][a] for a in rec["clique"])
        assert set(rec) == {"clique", "value", "mechanism", "sigma"} and rec["mechanism"] == "discrete-gaussian"
        sigmas.add(rec["sigma"])
        noise.append(diff.ravel())
    assert len(sigmas) == 1  # Fixed, equal weights: one scale
    sigma = sigmas.pop()
    k = np.concatenate(noise).astype(float)
    m = k.size  # 60 + 12 + 20 + 15 + 5 = 112 cells
    assert m == 112
    assert abs(k.mean()) < Z * sigma / math.sqrt(m)
    # sd of N_Z(0, sigma^2) is sigma to 1e-8 here; the sample sd's standard error is about sigma / sqrt(2 m)
    assert abs(k.std() - sigma) < Z * sigma / math.sqrt(2 * m)


def test_pure_table_reads_discrete_laplace_noise_of_opendps_scale(pure):
    table, eps, metric, frame = pure
    release = release_from_contingency_table(table, mechanism="discrete-laplace")
    assert "n" not in release
    recs = release["measurements"]
    b = {2.0 / r["epsilon"] for r in recs}
    assert len(b) == 1
    b = b.pop()
    for r, m in zip(recs, table.marginals.flatten()):
        assert r["sensitivity"] == 2 and set(r) == {"clique", "value", "mechanism", "epsilon", "sensitivity"}
        assert r["epsilon"] * m.stddev == pytest.approx(2.0 * math.sqrt(2.0), rel=1e-15)  # stddev = b sqrt 2
    k = np.concatenate([d.ravel() for d, _ in _noise(release, frame)]).astype(float)
    q = math.exp(-1.0 / b)
    sd = math.sqrt(2.0 * q) / (1.0 - q)  # the discrete Laplace's sd (a little below b sqrt 2)
    # the sample variance of Laplace noise has sd sqrt(mu4 - sd^4) / sqrt(m), mu4 = 24 b^4 (continuous, close)
    assert abs(k.mean()) < Z * sd / math.sqrt(k.size)
    assert abs(k.var() - sd ** 2) < Z * math.sqrt(24 * b ** 4 - sd ** 4) / math.sqrt(k.size)


def test_zcdp_accounting_against_opendps_map(zcdp):
    """OpenDP's rho for change-one d_in = 1 is the sum of 2^2/(2 sigma^2) over the marginals (L2 sensitivity 2);
    dpposterior's replace-one rho (L2 sensitivity sqrt 2: two cells move by one) is exactly half of it."""
    from dpposterior.mechanisms.discrete_gaussian import DiscreteGaussian

    table, rho_opendp, metric, _ = zcdp
    assert metric == "ChangeOneDistance()"
    assert rho_opendp == pytest.approx(0.5, rel=1e-12)
    release = release_from_contingency_table(table, mechanism="discrete-gaussian")
    ours = opendp_like = 0.0
    for rec in release["measurements"]:
        cells = int(np.asarray(rec["value"]).size)
        mech = DiscreteGaussian(rec["sigma"], math.sqrt(2.0))
        ours += mech.privacy_accounting(dim=cells, shifts=(1.0, 1.0)).rho
        opendp_like += 2.0 ** 2 / (2.0 * rec["sigma"] ** 2)
    assert ours == pytest.approx(rec["sigma"] ** -2 * len(release["measurements"]), rel=1e-12)
    # OpenDP's binary search picks the scale whose rho is just below d_out
    assert opendp_like <= rho_opendp * (1 + 1e-12)
    assert opendp_like == pytest.approx(rho_opendp, rel=1e-6)
    assert ours == pytest.approx(rho_opendp / 2.0, rel=1e-6)


def test_pure_accounting_against_opendps_map(pure):
    """OpenDP's epsilon for change-one d_in = 1 is the sum of 2/b over the marginals (L1 sensitivity 2, the
    replace-one sensitivity): dpposterior's sum of the records' epsilons is the same number."""
    from dpposterior.mechanisms.discrete_laplace import DiscreteLaplace

    table, eps_opendp, metric, _ = pure
    assert metric == "ChangeOneDistance()"
    release = release_from_contingency_table(table, mechanism="discrete-laplace")
    ours = sum(DiscreteLaplace(r["epsilon"], r["sensitivity"]).privacy_cost()[0] for r in release["measurements"])
    assert ours <= eps_opendp * (1 + 1e-12)
    assert ours == pytest.approx(eps_opendp, rel=1e-6)
    assert eps_opendp == pytest.approx(4.0, rel=1e-12)


def test_mst_table_with_oneway_step_reads_and_spends_at_most_opendps_rho():
    """MST spends part of rho on selection (no measurement) and part on one-way ``dp_len`` counts of its own
    scale: every measurement is read with its own sigma, and their replace-one-at-sensitivity-2 sum stays below
    OpenDP's rho."""
    dp = pytest.importorskip("opendp.prelude")
    pytest.importorskip("mbi")
    table, rho, _, frame = _release({"rho": 0.5}, dp.mbi.MST(estimator=_fast_estimator))
    release = release_from_contingency_table(table, mechanism="discrete-gaussian")
    cliques = [tuple(r["clique"]) for r in release["measurements"]]
    assert cliques[:3] == [("a",), ("b",), ("c",)] and all(len(c) == 2 for c in cliques[3:])
    assert len({r["sigma"] for r in release["measurements"]}) == 2  # one-way scale, multiway scale
    spent = sum(4.0 / (2.0 * r["sigma"] ** 2) for r in release["measurements"])
    assert spent < rho
    # the one-way step has half the budget: 3 counts at L2 sensitivity 2
    oneway = release["measurements"][0]["sigma"]
    assert 3 * 4.0 / (2.0 * oneway ** 2) == pytest.approx(rho / 2, rel=1e-6)
    for diff, rec in _noise(release, frame):
        assert np.all(np.abs(diff) < 8 * rec["sigma"])


def test_contingency_table_needs_its_mechanism(zcdp):
    with pytest.raises(InputError) as info:
        release_from_contingency_table(zcdp[0])
    assert info.value.field == "mechanism"
    assert "does not record its measure" in info.value.reason and "max_divergence" in info.value.reason
    assert "\n" not in str(info.value)


def test_contingency_table_refusals(zcdp):
    table = zcdp[0]
    with pytest.raises(InputError, match="^mechanism: must be one of discrete-laplace, discrete-gaussian"):
        release_from_contingency_table(table, mechanism="laplace")
    with pytest.raises(InputError, match="^table: must be an OpenDP ContingencyTable"):
        release_from_contingency_table({"keys": {}}, mechanism="discrete-gaussian")
    for n in (0, -3, 2.5, True, "2000"):
        with pytest.raises(InputError, match="^n: must be an integer > 0"):
            release_from_contingency_table(table, mechanism="discrete-gaussian", n=n)


def test_contingency_table_refuses_a_prefix_query_naming_its_index():
    pytest.importorskip("mbi")
    from mbi import LinearMeasurement
    from opendp.extras.mbi._utilities import Marginals, SelectPrefixQuery

    ms = [LinearMeasurement(np.array([5, 6, 1]), ("b",), stddev=2.0),
          LinearMeasurement(np.array([5, 6]), ("a",), stddev=2.0, query=SelectPrefixQuery(2))]
    fake = SimpleNamespace(keys={"a": ["x", "y", None], "b": ["F", "M", None]}, marginals=Marginals({}).add(*ms))
    with pytest.raises(InputError, match=r"^table\.marginals\.1: measurement 1 .*SelectPrefixQuery.*identity"):
        release_from_contingency_table(fake, mechanism="discrete-gaussian")
    # non-integer values under integer noise
    bad = SimpleNamespace(keys=fake.keys, marginals=Marginals({}).add(
        LinearMeasurement(np.array([5.0, 6.5, 1.0]), ("b",), stddev=2.0)))
    with pytest.raises(InputError, match=r"^table\.marginals\.0\.value: cell 1 is 6\.5, not an integer"):
        release_from_contingency_table(bad, mechanism="discrete-gaussian")
    # integer-valued floats are converted
    ok = SimpleNamespace(keys=fake.keys, marginals=Marginals({}).add(
        LinearMeasurement(np.array([5.0, -6.0, 1.0]), ("b",), stddev=2.0)))
    assert release_from_contingency_table(ok, mechanism="discrete-gaussian")["measurements"][0]["value"] == [5, -6, 1]


# --------------------------------------------------------------------------- linear measurements
def _lm(values, clique, stddev=3.0, **kw):
    mbi = pytest.importorskip("mbi")
    return mbi.LinearMeasurement(np.asarray(values), tuple(clique), stddev=stddev, **kw)


def test_linear_measurements_c_order_zero_way_and_mbi_domain():
    mbi = pytest.importorskip("mbi")
    dom = mbi.Domain.fromdict({"a": 2, "b": 3})
    ms = [_lm(np.arange(6), ("a", "b")), _lm(np.arange(6), ("b", "a")), _lm([100.0], ())]
    r = release_from_linear_measurements(ms, dom, mechanism="discrete-gaussian", n=100,
                                         labels={"a": ["u", "v"]}, description="test")
    assert r["domain"] == {"a": 2, "b": 3} and r["labels"] == {"a": ["u", "v"]} and r["description"] == "test"
    assert r["measurements"][0]["value"] == [[0, 1, 2], [3, 4, 5]]
    assert r["measurements"][1]["value"] == [[0, 1], [2, 3], [4, 5]]
    assert r["measurements"][2] == {"clique": [], "value": 100, "mechanism": "discrete-gaussian", "sigma": 3.0}
    # the flattening is mbi's own: Factor.datavector of the table read back
    f = mbi.Factor(dom, np.asarray(r["measurements"][0]["value"], float))
    assert np.array_equal(np.asarray(f.datavector()), np.arange(6))


def test_linear_measurements_laplace_and_gaussian_fields():
    from dpposterior.mechanisms.gaussian import _delta_of_sigma

    b = 3.0
    ms = [_lm([1, 2], ("a",), stddev=b * math.sqrt(2.0))]
    r = release_from_linear_measurements(ms, {"a": 2}, mechanism="discrete-laplace")["measurements"][0]
    assert r["epsilon"] == 2.0 / b and r["sensitivity"] == 2
    r = release_from_linear_measurements([_lm([1.5, 2.25], ("a",), stddev=b * math.sqrt(2.0))], {"a": 2},
                                         mechanism="laplace")["measurements"][0]
    assert r["value"] == [1.5, 2.25] and r["epsilon"] == 2.0 / b
    r = release_from_linear_measurements([_lm([1.5, 2.25], ("a",), stddev=4.0)], {"a": 2}, mechanism="gaussian",
                                         delta=1e-6)["measurements"][0]
    assert r["sigma"] == 4.0 and r["delta"] == 1e-6 and r["sensitivity"] == math.sqrt(2.0)
    assert _delta_of_sigma(4.0, r["epsilon"], math.sqrt(2.0)) <= 1e-6
    assert _delta_of_sigma(4.0, r["epsilon"] * (1 - 1e-6), math.sqrt(2.0)) > 1e-6


@pytest.mark.parametrize("kwargs, match", [
    (dict(domain={"a": 2}, mechanism="skellam"), r"^mechanism: must be one of"),
    (dict(domain={"a": 2}, mechanism=None), r"^mechanism: the ContingencyTable does not record"),
    (dict(domain={"a": 2}, mechanism="gaussian"), r"^delta: mechanism gaussian states"),
    (dict(domain={"a": 2}, mechanism="discrete-gaussian", delta=1e-6), r"^delta: is for continuous Gaussian"),
    (dict(domain={"a": 0}, mechanism="discrete-gaussian"), r"^domain\.a: must be an integer size >= 1"),
    (dict(domain=[("a", 2)], mechanism="discrete-gaussian"), r"^domain: must be a dict"),
    (dict(domain={}, mechanism="discrete-gaussian"), r"^domain: has no attributes"),
    (dict(domain={"a": 2}, mechanism="discrete-gaussian", labels={"a": ["u"]}), r"^labels\.a: has 1 labels"),
    (dict(domain={"a": 2}, mechanism="discrete-gaussian", labels={"z": ["u"]}), r"^labels\.z: is not an attr"),
    (dict(domain={"a": 2}, mechanism="discrete-gaussian", n=0), r"^n: must be an integer > 0"),
])
def test_linear_measurements_refuse_bad_arguments(kwargs, match):
    with pytest.raises(InputError, match=match):
        release_from_linear_measurements([_lm([1, 2], ("a",))], **kwargs)


@pytest.mark.parametrize("measurement, match", [
    (lambda: _lm([1, 2], ("z",)), r"^measurements\.0\.clique: 'z' is not an attribute"),
    (lambda: _lm([1, 2, 3], ("a",)), r"^measurements\.0\.value: has 3 cells"),
    (lambda: _lm([1, 2], ("a",), stddev=0.0), r"^measurements\.0\.stddev: must be a finite number > 0"),
    (lambda: _lm([1, np.nan], ("a",)), r"^measurements\.0\.value: cell 1 is nan"),
    (lambda: _lm([1, 2.5], ("a",)), r"^measurements\.0\.value: cell 1 is 2\.5, not an integer"),
    (lambda: _lm([1, 2], ("a",), query=lambda f: f.datavector()[:2]), r"^measurements\.0: measurement 0 .*"
                                                                        r"not the identity"),
    (lambda: "not a measurement", r"^measurements\.0: must be an mbi LinearMeasurement"),
])
def test_linear_measurements_refuse_bad_measurements(measurement, match):
    with pytest.raises(InputError, match=match) as info:
        release_from_linear_measurements([measurement()], {"a": 2}, mechanism="discrete-gaussian")
    assert "\n" not in str(info.value)


def test_linear_measurements_refuse_an_empty_list():
    with pytest.raises(InputError, match=r"^measurements: holds no measurements"):
        release_from_linear_measurements([], {"a": 2}, mechanism="discrete-gaussian")


# --------------------------------------------------------------------------- cliques files
MEAS = [{"clique": ["age", "income"], "value": [[3, 4], [5, 6], [7, 8]], "mechanism": "discrete-gaussian",
         "sigma": 12.0},
        {"clique": ["sex"], "value": [10, 11], "mechanism": "discrete-laplace", "epsilon": 0.5, "sensitivity": 2}]
DOMAIN = {"age": 3, "sex": 2, "income": 2}


def _write(tmp_path, name, content):
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


def test_cliques_json_list_and_object(tmp_path):
    r = release_from_cliques_file(_write(tmp_path, "m.json", MEAS), n=50)
    assert r["domain"] == {"age": 3, "income": 2, "sex": 2} and r["n"] == 50
    assert r["measurements"] == MEAS
    obj = {"domain": DOMAIN, "labels": {"sex": ["F", "M"]}, "n": 48842, "measurements": MEAS,
           "description": "d", "report_delta": 1e-6}
    r = release_from_cliques_file(_write(tmp_path, "o.json", obj))
    assert r["domain"] == DOMAIN and r["labels"] == {"sex": ["F", "M"]} and r["n"] == 48842
    assert r["description"] == "d" and r["report_delta"] == 1e-6
    assert release_from_cliques_file(_write(tmp_path, "o.json", obj), n=7)["n"] == 7


CSV_HEAD = "clique,age,sex,income,value,mechanism,sigma,epsilon,sensitivity\n"


def _csv_rows():
    rows = [f"age;income,{a},,{i},{v},discrete-gaussian,12,,\n"
            for (a, i), v in zip([(a, i) for a in range(3) for i in range(2)], [3, 4, 5, 6, 7, 8])]
    rows += ["sex,,0,,10,discrete-laplace,,0.5,2\n", "sex,,1,,11,discrete-laplace,,0.5,2\n"]
    return rows


def test_cliques_csv_long_form(tmp_path):
    rows = _csv_rows()
    r = release_from_cliques_file(_write(tmp_path, "m.csv", CSV_HEAD + "".join(rows[::-1])), domain=DOMAIN)
    got = {tuple(m["clique"]): m for m in r["measurements"]}
    assert got[("age", "income")]["value"] == [[3, 4], [5, 6], [7, 8]]
    assert got[("age", "income")]["sigma"] == 12.0 and got[("sex",)]["epsilon"] == 0.5
    assert r["domain"] == DOMAIN
    r = release_from_cliques_file(_write(tmp_path, "m.csv", CSV_HEAD + "".join(rows)))
    assert r["domain"] == {"age": 3, "sex": 2, "income": 2}
    # two measurements of one clique, told apart by a measurement column
    head = "measurement," + CSV_HEAD
    body = [f"1,{x}" for x in rows] + [f"2,{x}" for x in rows[6:]]
    r = release_from_cliques_file(_write(tmp_path, "m.csv", head + "".join(body)))
    assert [m["clique"] for m in r["measurements"]] == [["age", "income"], ["sex"], ["sex"]]


@pytest.mark.parametrize("edit, match", [
    (lambda rows: rows + [rows[0]], r"^path: row 9: clique 'age;income' cell \(0, 0\) already given in row 1"),
    (lambda rows: rows[1:], r"^path: clique 'age;income' \(first in row 1\): cell \(0, 0\) is missing"),
    (lambda rows: [rows[0].replace(",3,", ",3.5,")] + rows[1:], r"^measurements\.0\.value: cell 0 is 3\.5, not an "
                                                                 r"integer \(mechanism discrete-gaussian"),
    (lambda rows: [rows[0].replace("12", "13")] + rows[1:],
     r"^sigma: row 2: differs from row 1 of the same measurement"),
    (lambda rows: [rows[0].replace("age;income,0,,0", "age;income,0,1,0")] + rows[1:],
     r"^sex: row 1: '1' given for an attribute not in the clique"),
    (lambda rows: [rows[0].replace("age;income,0,,0", "age;income,x,,0")] + rows[1:],
     r"^age: row 1: 'x' is not an integer code"),
    (lambda rows: [rows[0].replace("age;income,0,,0", "age;income,7,,0")] + rows[1:],
     r"^age: row 1: code 7 is outside 0 \.\. 2"),
    (lambda rows: [rows[0].replace("age;income", "age;weight")] + rows[1:], r"^clique: row 1: 'weight' has no "),
    (lambda rows: [rows[0].replace("age;income", "age;age")] + rows[1:], r"^clique: row 1: 'age;age' is not"),
    (lambda rows: [rows[0].replace("discrete-gaussian", "")] + rows[1:], r"^mechanism: row 1 is empty"),
    (lambda rows: [x.replace("discrete-gaussian", "nope") for x in rows],
     r"^measurements\.0\.mechanism: unknown mechanism 'nope'"),
    (lambda rows: rows[:6] + [x.replace(",0.5,", ",,") for x in rows[6:]],
     r"^measurements\.1\.epsilon: is required by mechanism 'discrete-laplace' \(rows from 7\)"),
    (lambda rows: [x.replace(",12,", ",-1,") for x in rows], r"^measurements\.0\.sigma: "),
    (lambda rows: [rows[0].replace(",3,", ",abc,")] + rows[1:], r"^value: row 1: 'abc' is not a number"),
    (lambda rows: [rows[0].rstrip("\n") + ",extra\n"] + rows[1:], r"^path: row 1 has 10 cells for 9 columns"),
])
def test_cliques_csv_refusals(tmp_path, edit, match):
    p = _write(tmp_path, "m.csv", CSV_HEAD + "".join(edit(_csv_rows())))
    with pytest.raises(InputError, match=match) as info:
        release_from_cliques_file(p, domain=DOMAIN)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("content, match", [
    ("clique,age,value\n", r"^path: no column 'mechanism'"),
    ("", r"^path: m\.csv is empty"),
    (CSV_HEAD, r"^path: m\.csv has no data rows"),
    ("clique,age,weight,value,mechanism,sigma\nage,0,,1,discrete-gaussian,1\n",
     r"^path: column 'weight' is neither an attribute of the domain"),
    ("clique,age,age,value,mechanism\n", r"^path: column 'age' appears twice"),
])
def test_cliques_csv_refuses_bad_headers(tmp_path, content, match):
    with pytest.raises(InputError, match=match):
        release_from_cliques_file(_write(tmp_path, "m.csv", content), domain=DOMAIN)


def _json_edit(i, **changes):
    out = [dict(m) for m in MEAS]
    out[i].update(changes)
    return out


@pytest.mark.parametrize("content, domain, match", [
    ("{not json", None, r"^path: cannot read JSON m\.json"),
    ('"text"', None, r"^path: m\.json: must hold a list"),
    ([], None, r"^measurements: must be a non-empty list"),
    ({"measurements": MEAS, "colour": 1}, None, r"^colour: unknown field of a cliques file"),
    ({"measurements": MEAS, "family": "gaussian"}, None, r"^family: must be 'marginals'"),
    ({"domain": DOMAIN}, None, r"^measurements: missing"),
    ({"domain": {**DOMAIN, "age": 4}, "measurements": MEAS}, None, r"^measurements\.0\.value: has shape \(3, 2\); "
                                                                    r"the domain gives \(4, 2\)"),
    ({"domain": {**DOMAIN, "age": 4}, "measurements": MEAS}, DOMAIN, r"^domain\.age: the file says 4, the argument 3"),
    ({"domain": DOMAIN, "measurements": MEAS, "labels": {"sex": ["F"]}}, None, r"^labels\.sex: has 1 labels"),
    ({"measurements": MEAS, "n": 0}, None, r"^n: must be an integer > 0"),
    ([1], None, r"^measurements\.0: must be an object"),
    ([{"clique": ["a"], "value": [1]}], None, r"^measurements\.0\.mechanism: missing"),
    (_json_edit(0, clique="age"), None, r"^measurements\.0\.clique: must be a list of attribute names"),
    (_json_edit(0, clique=["age", "age"]), None, r"^measurements\.0\.clique: names an attribute twice"),
    (_json_edit(0, value=[[1, 2], [3]]), None, r"^measurements\.0\.value: must be a regular nested list"),
    (_json_edit(0, value=[1, 2]), None, r"^measurements\.0\.value: has 1 levels of nesting for a clique of 2"),
    (_json_edit(1, clique=["age"]), None, r"^measurements\.1\.value: gives age 2 categories; an earlier "
                                          r"measurement 3"),
    (_json_edit(0, clique=["weight", "income"]), DOMAIN, r"^measurements\.0\.clique: 'weight' is not an attr"),
    (_json_edit(0, value=[[3, 4], [5, 6], [7, 8.5]]), None, r"^measurements\.0\.value: cell 5 is 8\.5, not an "
                                                            r"integer"),
    (_json_edit(0, sigma=None), None, r"^measurements\.0\.sigma: is required by mechanism 'discrete-gaussian'"),
    (_json_edit(0, epsilon=1.0), None, r"^measurements\.0\.epsilon: not a field of mechanism 'discrete-gaussian'"),
    (_json_edit(1, colour=1), None, r"^measurements\.1\.colour: unknown field"),
    (_json_edit(1, mechanism="nope"), None, r"^measurements\.1\.mechanism: unknown mechanism 'nope'"),
])
def test_cliques_json_refusals(tmp_path, content, domain, match):
    with pytest.raises(InputError, match=match) as info:
        release_from_cliques_file(_write(tmp_path, "m.json", content), domain=domain)
    assert "\n" not in str(info.value)


def test_cliques_file_refuses_bad_paths(tmp_path):
    with pytest.raises(InputError, match=r"^path: file not found"):
        release_from_cliques_file(tmp_path / "missing.json")
    with pytest.raises(InputError, match=r"^path: m\.txt: a cliques file is \.json or \.csv"):
        release_from_cliques_file(_write(tmp_path, "m.txt", "x"))
    with pytest.raises(InputError, match=r"^domain: must be a dict"):
        release_from_cliques_file(_write(tmp_path, "m.json", MEAS), domain=[1])


# --------------------------------------------------------------------------- the family validates (once it lands)
def test_family_loads_what_the_readers_write(tmp_path, zcdp, pure):
    pytest.importorskip("dpposterior.families.marginals")
    import dpposterior

    for table, mech in ((zcdp[0], "discrete-gaussian"), (pure[0], "discrete-laplace")):
        release = dpposterior.load_release(release_from_contingency_table(table, mechanism=mech, n=N))
        assert release.family == "marginals"
    dpposterior.load_release(release_from_cliques_file(_write(tmp_path, "m.json", {"domain": DOMAIN,
                                                                                    "measurements": MEAS}), n=100))
    rows = "".join(_csv_rows())
    dpposterior.load_release(release_from_cliques_file(_write(tmp_path, "m.csv", CSV_HEAD + rows), n=100))
