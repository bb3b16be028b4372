"""Privacy claims (issue: replace-one sensitivities, the neighbouring relation, ``dpposterior audit``).

* The linear-regression replace-one sensitivities against their closed form and against a brute-force
  search over actual records (Gaussian: exact; Laplace: an upper bound).
* ``audit`` on every curator: recorded sensitivity >= searched worst case, empirical epsilon lower bound
  <= claimed epsilon (seeded numpy path: deterministic); the OpenDP path on one curator.
* The audit catches under-noised curators: hidden 1.5x less noise (empirical bound above the claim),
  a sensitivity divided by 1.5 (recorded < searched), and the old add/remove linear-regression calibration.
* Releases state ``neighbouring``; the loader refuses under-stated sensitivities or sigmas; ``not_dp``.
* Bad inputs found while auditing end in one line and exit code 2.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from dpposterior import privacy
from dpposterior.cli import main
from dpposterior.errors import InputError
from dpposterior.families import FAMILY_MODULES, get_family
from dpposterior.families import linear_regression as lr
from dpposterior.mechanisms import analytic_sigma
from dpposterior.release import load_release

# --------------------------------------------------------------------------- linear regression sensitivities


def _f(x, y, intercept, blocks):
    """One record's released contribution (upper(xx'), xy, y^2) with the design row [1, x] or x."""
    row = np.concatenate([[1.0], x]) if intercept else np.asarray(x, float)
    parts = []
    if "xtx" in blocks:
        parts.append(np.outer(row, row)[np.triu_indices(len(row))])
    if "xty" in blocks:
        parts.append(row * y)
    if "yty" in blocks:
        parts.append([y * y])
    return np.concatenate(parts)


def _brute_force(mechanism, blocks, X, Y, d_x, intercept, starts=60, seed=0):
    """Largest ||f(x, y) - f(x', y')|| found by random restarts + Powell over actual records."""
    rng = np.random.default_rng(seed)
    p = 1 if mechanism == "laplace" else 2

    def unpack(z):
        x, xp = z[:d_x], z[d_x:2 * d_x]
        x = x * min(1.0, X / max(np.linalg.norm(x), 1e-300))
        xp = xp * min(1.0, X / max(np.linalg.norm(xp), 1e-300))
        y, yp = np.clip(z[2 * d_x:], -Y, Y)
        return x, xp, y, yp

    def neg(z):
        x, xp, y, yp = unpack(z)
        return -np.linalg.norm(_f(x, y, intercept, blocks) - _f(xp, yp, intercept, blocks), ord=p)

    best = 0.0
    for _ in range(starts):
        z0 = np.concatenate([rng.normal(size=2 * d_x) * X, rng.uniform(-Y, Y, 2)])
        res = minimize(neg, z0, method="Powell")
        best = max(best, -res.fun)
    return best


@pytest.mark.parametrize("X,Y", [(1.0, 1.0), (2.0, 0.5), (0.5, 2.0), (3.9, 1.4)])
def test_gaussian_joint_closed_form(X, Y):
    # module docstring: 2X^4 + 2X^2Y^2 + Y^4/2 when Y^2 <= 2X^2, else 4X^2Y^2 (d >= 2, no intercept/yty)
    expected = 2 * X ** 4 + 2 * X ** 2 * Y ** 2 + Y ** 4 / 2 if Y ** 2 <= 2 * X ** 2 else 4 * X ** 2 * Y ** 2
    assert lr.joint_sensitivity("gaussian", X, Y, 2, False) == pytest.approx(math.sqrt(expected), rel=1e-9)
    # the example: X = Y = 1, d = 2 gives 2.121, not the add/remove 1.414
    assert lr.joint_sensitivity("gaussian", 1.0, 1.0, 2, False) == pytest.approx(2.1213203, rel=1e-6)


@pytest.mark.parametrize("blocks,d_x,intercept", [
    (("xtx", "xty"), 2, False), (("xtx", "xty", "yty"), 2, False), (("xtx",), 2, False), (("xty",), 2, False),
    (("xtx", "xty"), 1, False), (("xtx", "xty"), 2, True), (("xtx", "xty", "yty"), 1, True),
    (("xtx", "xty"), 3, False)])
def test_gaussian_replace_one_is_the_searched_worst_case(blocks, d_x, intercept):
    X, Y = 1.3, 0.8
    d = d_x + (1 if intercept else 0)
    formula = lr.replace_one_sensitivity("gaussian", blocks, X, Y, d, intercept)
    found = _brute_force("gaussian", blocks, X, Y, d_x, intercept)
    # never below what a search over actual records finds (privacy), and attained (exact, no wasted noise)
    assert formula >= found * (1 - 1e-9)
    assert found >= 0.995 * formula


@pytest.mark.parametrize("blocks,d_x,intercept", [
    (("xtx", "xty", "yty"), 2, False), (("xtx",), 2, False), (("xty",), 3, False), (("xtx", "xty", "yty"), 2, True),
    (("xtx", "xty"), 1, False)])
def test_laplace_bound_is_at_least_the_searched_worst_case(blocks, d_x, intercept):
    X, Y = 1.0, 1.0
    d = d_x + (1 if intercept else 0)
    bound = lr.replace_one_sensitivity("laplace", blocks, X, Y, d, intercept)
    found = _brute_force("laplace", blocks, X, Y, d_x, intercept)
    assert bound >= found * (1 - 1e-9)
    if blocks == ("xty",):  # exact for xty alone: 2 sqrt(d) X Y
        assert found == pytest.approx(bound, rel=5e-3)
    # the old add/remove value is below the replace-one worst case (the defect)
    if blocks == ("xtx", "xty", "yty") and not intercept:
        old = (d + 1) / 2 * X ** 2 + math.sqrt(d) * X * Y + Y ** 2
        assert found > old * 1.1


def test_curator_release_records_replace_one(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 2))
    frame = pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "y": x @ [0.5, -0.2] + rng.normal(0, 0.3, 200)})
    frame.to_csv(tmp_path / "d.csv", index=False)
    for mech, expected in (("gaussian", math.sqrt(4.5)), ("laplace", 3 + 2 * math.sqrt(2) + 1)):
        out = tmp_path / f"{mech}.json"
        assert main(["release", str(tmp_path / "d.csv"), "--family", "linear-regression", "--features", "x1,x2",
                     "--response", "y", "--x-norm", "1", "--y-abs", "1", "--epsilon", "1", "--mechanism", mech,
                     "--seed", "1", "--out", str(out)]) == 0
        raw = json.loads(out.read_text())
        assert raw["neighbouring"] == "replace-one"
        rec = raw["parties"][0]["statistics"]["xtx"]
        assert rec["sensitivity"] == pytest.approx(expected, rel=1e-9)
        # at least the worst case the audit's search finds (4.37 -- 4.55 for the Laplace variant)
        assert rec["sensitivity"] >= (2.1213 if mech == "gaussian" else 4.37)


# --------------------------------------------------------------------------- the audit on every curator


#: every registered family with a curator (registry-driven: a new family's curator cannot escape the audit)
CURATOR_FAMILIES = [name for name in FAMILY_MODULES if get_family(name).curate is not None]


@pytest.mark.parametrize("family", CURATOR_FAMILIES)
def test_audit_every_curator(family):
    assert family in privacy.SPECS, f"the {family} curator has no privacy audit (privacy.SPECS)"
    # reduced sizes (full sizes: test_audit_full_size, -m slow); one base data set for the sums over
    # records, three where a statistic is not one (gaussian variance)
    results = privacy.audit(family, draws=200, samplers=("numpy",), restarts=1, steps=15, seed=3,
                            confidence=0.95, bases=3 if family == "gaussian" else 1)
    assert results
    for r in results:
        assert r.neighbouring == "replace-one" and r.refused_by_loader is None
        for g in r.groups:
            assert g.recorded_sensitivity >= g.searched_sensitivity * (1 - 1e-9), (r.name, g)
            assert g.searched_sensitivity > 0
        assert r.analytic_epsilon <= r.claimed_epsilon * (1 + 1e-6), r.name
        for s in r.samplers:
            assert s.epsilon_lower_bound <= r.claimed_epsilon, (r.name, s)
        assert r.ok


def test_audit_searched_sensitivities_match_the_derivations():
    got = {r.name: [g.searched_sensitivity for g in r.groups]
           for fam in ("gaussian", "binomial", "multinomial", "exponential", "poisson")
           for r in privacy.audit(fam, draws=20, samplers=("numpy",), restarts=1, steps=10, bases=3, variants=[fam])}
    n = privacy.SPECS["gaussian"][0].n
    assert got["gaussian"] == pytest.approx([1 / n, 1 / n])          # (b-a)/n, (b-a)^2/n on [0, 1]
    assert got["binomial"] == [1.0] and got["multinomial"] == [2.0]
    assert got["exponential"] == pytest.approx([3.0]) and got["poisson"] == pytest.approx([5.0])  # max(|a|,|b|,b-a)
    (small_area,) = privacy.audit("small-area", draws=20, samplers=("numpy",), restarts=1, steps=10, bases=1,
                                  variants=["small-area discrete-laplace"])
    assert [g.searched_sensitivity for g in small_area.groups] == pytest.approx([2.0])  # one count down, one up


def test_audit_opendp_path():
    (r,) = privacy.audit("binomial", draws=400, samplers=("opendp",), restarts=1, steps=5, confidence=0.999,
                          variants=["binomial"])
    (s,) = r.samplers
    assert s.sampler == "opendp" and s.epsilon_lower_bound <= r.claimed_epsilon


def _under_noised_binomial(hidden: bool):
    real = get_family("binomial").curate

    def curate(frame, options):
        if hidden:  # 1.5x less noise than the file says: b = 1/(1.5 eps)
            rel = real(frame, dataclasses.replace(options, epsilon=options.epsilon * 1.5))
            rel["statistics"]["successes"]["epsilon"] = options.epsilon
            return rel
        # the sensitivity divided by 1.5, recorded and used: b = (1/1.5)/eps
        rel = real(frame, dataclasses.replace(options, epsilon=options.epsilon * 1.5))
        rec = rel["statistics"]["successes"]
        rec["epsilon"], rec["sensitivity"] = options.epsilon, 1.0 / 1.5
        return rel
    return curate


def test_audit_catches_hidden_under_noise():
    (r,) = privacy.audit("binomial", draws=2000, samplers=("numpy",), restarts=1, steps=5, variants=["binomial"],
                         curate=_under_noised_binomial(hidden=True))
    (s,) = r.samplers
    # the true epsilon is 1.5: the empirical lower bound exceeds the claimed 1
    assert s.epsilon_lower_bound > r.claimed_epsilon and not s.ok and not r.ok
    # while the correct curator, same seed and draws, stays below the claim
    (ok,) = privacy.audit("binomial", draws=2000, samplers=("numpy",), restarts=1, steps=5, variants=["binomial"])
    assert ok.samplers[0].epsilon_lower_bound <= ok.claimed_epsilon


def test_audit_catches_divided_sensitivity():
    (r,) = privacy.audit("binomial", draws=2000, samplers=("numpy",), restarts=1, steps=5, variants=["binomial"],
                         curate=_under_noised_binomial(hidden=False))
    (g,) = r.groups
    assert g.recorded_sensitivity == pytest.approx(1 / 1.5) and g.searched_sensitivity == 1.0 and not g.ok
    assert r.analytic_epsilon == pytest.approx(1.5)
    assert r.samplers[0].epsilon_lower_bound > r.claimed_epsilon
    assert r.refused_by_loader and "smaller" in r.refused_by_loader and not r.ok


def test_audit_catches_old_add_remove_linear_regression(monkeypatch):
    def add_remove(mechanism, x_norm, y_abs, d, with_yty, intercept=False):
        return math.sqrt(x_norm ** 4 + x_norm ** 2 * y_abs ** 2 + (y_abs ** 4 if with_yty else 0.0))

    monkeypatch.setattr(lr.sensitivity, "joint_sensitivity", add_remove)  # where the release and curator look it up
    (r,) = privacy.audit("linear-regression", draws=20, samplers=("numpy",), restarts=1, steps=20, bases=1,
                         variants=["linear-regression gaussian xtx,xty"])
    (g,) = r.groups
    # the reduced search gets within a few % of the exact 2.121; caught either way
    assert g.recorded_sensitivity == pytest.approx(math.sqrt(2)) and g.searched_sensitivity > 2.0
    assert not g.ok and r.analytic_epsilon > 1.4


def test_epsilon_lower_bound_is_valid_and_has_power():
    # (numpy's floating-point Laplace: the scores are rounded, see epsilon_lower_bound)
    rng = np.random.default_rng(5)
    # Laplace scores of a 1-d mechanism with true epsilon 1: the bound stays below 1 ...
    for eps_true, below in ((1.0, True), (2.0, False)):
        a = rng.laplace(0.0, 1 / eps_true, 20000)
        b = rng.laplace(1.0, 1 / eps_true, 20000)
        score = lambda o: -np.abs(o) + np.abs(o - 1)  # noqa: E731
        lb = privacy.epsilon_lower_bound(score(a), score(b), 0.0, 0.95)
        assert (lb <= 1.0) == below and lb <= eps_true


# --------------------------------------------------------------------------- release file and loader


def _lr_release(**kw):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 2))
    X = X / np.maximum(1, np.linalg.norm(X, axis=1))[:, None]
    y = np.clip(X @ [0.3, 0.1] + rng.normal(0, 0.1, 100), -1, 1)
    return lr.make_release([X], [y], features=["a", "b"], epsilon=1.0, delta=1e-3, x_norm=1.0, y_abs=1.0,
                           rng=2, **kw)


def test_loader_refuses_understated_sensitivity_and_sigma():
    raw = _lr_release()
    rec = raw["parties"][0]["statistics"]["xtx"]
    assert rec["sensitivity"] == pytest.approx(math.sqrt(4.5))
    old = json.loads(json.dumps(raw))
    for r in old["parties"][0]["statistics"].values():
        r["sensitivity"] = math.sqrt(2.0)
    with pytest.raises(InputError) as exc:
        load_release(old)
    msg = str(exc.value)
    assert msg.startswith("release.parties.0.statistics.xtx.sensitivity") and "1.41421" in msg and "2.12132" in msg
    low = json.loads(json.dumps(raw))
    for r in low["parties"][0]["statistics"].values():
        r["sigma"] = 0.5 * r["sigma"]
    with pytest.raises(InputError, match=r"xtx\.sigma: .* is smaller than the replace-one sigma"):
        load_release(low)
    # more noise than needed is private, and it is what the engines use
    more = json.loads(json.dumps(raw))
    for r in more["parties"][0]["statistics"].values():
        r["sensitivity"] = 3.0
        r.pop("sigma")
    data = load_release(more).regression_data()
    assert data.sigma_s[0] == pytest.approx(analytic_sigma(1.0, 1e-3, 3.0))


def test_not_dp_release_loads_and_is_labelled(tmp_path, capsys):
    raw = _lr_release(sigma=1e-3)
    rel = load_release(raw)
    assert not rel.is_dp and "not calibrated" in rel.not_dp
    path = tmp_path / "r.json"
    rel.save(path)
    assert main(["infer", str(path), "--out", str(tmp_path / "p.nc"), "--method", "bayes-fixeds-fast",
                 "--quiet", "--no-naive", "--seed", "1"]) == 0
    assert "NOT (epsilon, delta)-DP" in capsys.readouterr().err
    raw["not_dp"] = "  "
    with pytest.raises(InputError, match="not_dp"):
        load_release(raw)


def test_neighbouring_field():
    raw = _lr_release()
    assert load_release(raw).neighbouring == "replace-one"          # absent -> replace-one
    raw["neighbouring"] = "add-remove"
    with pytest.raises(InputError, match="release.neighbouring: must be 'replace-one'"):
        load_release(raw)


def test_linreg_ju_and_loglinear_refuse_small_sensitivity():
    from dpposterior.families import linreg_ju, loglinear

    ju = linreg_ju.make_release(np.zeros(9), 1.0, n=100)
    ju["statistics"]["sufficient"]["sensitivity"] = 0.1
    with pytest.raises(InputError, match=r"sufficient\.sensitivity: 0\.1 is smaller than the replace-one"):
        load_release(ju)
    ll = loglinear.make_release([np.full((2, 2), 0.25).tolist(), np.full((2, 2), 0.25).tolist()], 1.0, n=100)
    ll["statistics"]["tables"]["sensitivity"] = 0.02
    with pytest.raises(InputError, match=r"tables\.sensitivity: 0\.02 is smaller"):
        load_release(ll)


# --------------------------------------------------------------------------- bad inputs (one line, exit 2)


@pytest.fixture
def gaussian_files(tmp_path):
    pd.DataFrame({"x": np.random.default_rng(0).uniform(0, 100, 40)}).to_csv(tmp_path / "g.csv", index=False)
    rel = tmp_path / "r.json"
    assert main(["release", str(tmp_path / "g.csv"), "--family", "gaussian", "--column", "x", "--bounds", "0",
                 "100", "--epsilon", "1", "--seed", "1", "--out", str(rel)]) == 0
    return tmp_path, rel


def _one_line(capsys, field):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {field}"), err


def test_bad_inputs_found_while_auditing(gaussian_files, capsys):
    tmp, rel = gaussian_files
    base = ["release", str(tmp / "g.csv"), "--family", "gaussian", "--column", "x", "--epsilon", "1"]
    assert main(base + ["--bounds", "0", "100", "--seed", "2", "--out", str(tmp / "s.json")]) == 0
    assert "not for publication" in capsys.readouterr().err       # --seed says the noise is numpy's
    assert "not for publication" in json.loads((tmp / "s.json").read_text())["statistics"]["mean"]["sampler"]
    assert main(base + ["--bounds", "0", "100", "--out", "/no/such/dir/r.json"]) == 2
    _one_line(capsys, "--out")
    assert main(base + ["--bounds", "0", "1e308", "--out", str(tmp / "r2.json")]) == 2
    _one_line(capsys, "bounds")
    assert main(["infer", str(rel), "--out", "/no/such/dir/p.nc"]) == 2
    _one_line(capsys, "--out")
    raw = json.loads(rel.read_text())
    for field, value, name in (("value", 1e308, "release.statistics.mean.value"),
                               ("value", 1e9, "release.statistics.mean.value")):
        bad = json.loads(json.dumps(raw))
        bad["statistics"]["mean"][field] = value
        (tmp / "bad.json").write_text(json.dumps(bad))
        assert main(["infer", str(tmp / "bad.json"), "--out", str(tmp / "p.nc"), "--quiet"]) == 2
        _one_line(capsys, name)
    bad = json.loads(json.dumps(raw))
    bad["n"] = 10 ** 30
    (tmp / "bad.json").write_text(json.dumps(bad))
    assert main(["infer", str(tmp / "bad.json"), "--out", str(tmp / "p.nc"), "--quiet"]) == 2
    _one_line(capsys, "release.n")


def test_audit_cli(tmp_path, capsys):
    out = tmp_path / "audit.json"
    assert main(["audit", "--family", "binomial", "--draws", "100", "--samplers", "numpy", "--restarts", "1",
                 "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data[0]["family"] == "binomial" and data[0]["ok"] and data[0]["neighbouring"] == "replace-one"
    assert "searched" in capsys.readouterr().out
    for args, field in ((["--family", "nope"], "family"), (["--family", "binomial", "--draws", "3"], "draws"),
                        (["--family", "binomial", "--confidence", "1.5"], "confidence"),
                        (["--family", "binomial", "--samplers", "foo"], "samplers"),
                        (["--family", "binomial", "--out", "/no/such/a.json"], "--out")):
        assert main(["audit", *args]) == 2
        _one_line(capsys, field)


@pytest.mark.slow
@pytest.mark.parametrize("family", privacy.families())
def test_audit_full_size(family):
    for r in privacy.audit(family, draws=4000, restarts=4, steps=60, bases=6, confidence=0.99):
        assert r.ok, r.to_dict()
