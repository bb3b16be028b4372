"""Privacy accounting against code no one here wrote: Google's dp-accounting privacy loss distributions.

The reported epsilon of every release must be an upper bound on the tight epsilon of its worst
neighbouring pair (never below dp-accounting's optimistic estimate) and tight (at most 1% above its
pessimistic estimate at the default discretisation); the worst pairs are written out here by hand
from the replace-one relation (a record moved between two cells), not taken from the package.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

import dpposterior as dp
from dpposterior.errors import InputError
from dpposterior.mechanisms import DiscreteGaussian, DiscreteLaplace
from dpposterior.mechanisms.accounting import compose, zcdp_epsilon


def ref_epsilon(parts, delta):
    """(optimistic, pessimistic) epsilon at delta of dp-accounting's composition of ``parts``:
    ("dg", sigma, shift) | ("dl", b, shift) | ("lap", b, shift) | ("gauss", sigma, shift)."""
    out = []
    for pessimistic in (False, True):
        total = None
        for kind, scale, shift in parts:
            if kind == "dg":
                one = pld.from_discrete_gaussian_mechanism(scale, sensitivity=shift, pessimistic_estimate=pessimistic)
            elif kind == "dl":
                one = pld.from_discrete_laplace_mechanism(1.0 / scale, sensitivity=shift,
                                                          pessimistic_estimate=pessimistic)
            elif kind == "lap":
                one = pld.from_laplace_mechanism(scale, sensitivity=shift, pessimistic_estimate=pessimistic,
                                                 use_connect_dots=pessimistic)
            else:
                one = pld.from_gaussian_mechanism(scale, sensitivity=shift, pessimistic_estimate=pessimistic,
                                                  use_connect_dots=pessimistic)
            total = one if total is None else total.compose(one)
        out.append(total.get_epsilon_for_delta(delta))
    return tuple(out)


def assert_tight(reported, parts, delta):
    lo, hi = ref_epsilon(parts, delta)
    assert reported >= lo * (1 - 1e-9), f"optimistic: reported {reported} below dp-accounting's lower bound {lo}"
    assert reported <= hi * 1.01 + 1e-12, f"loose: reported {reported} more than 1% above dp-accounting's {hi}"


def small_area(sigma, G, C=2, mechanism="discrete-gaussian", **extra):
    value = [[5] * C for _ in range(G)]
    return {"format": "dpposterior-release/1", "family": "small-area", "areas": [f"a{g}" for g in range(G)],
            "cells": [f"c{c}" for c in range(C)],
            "statistics": {"counts": {"value": value, "mechanism": mechanism, "sigma": sigma, **extra}}}


# --------------------------------------------------------------------------- the optimistic epsilon
@pytest.mark.parametrize("sigma, G, tight", [([1.0, 10.0], 3, 7.00), ([2.0, 4.0], 30, 3.29),
                                             ([4.47, 8.0], 100, 1.37)])
def test_small_area_per_cell_sigma_takes_the_same_cell_of_two_areas(sigma, G, tight):
    rel = dp.load_release({**small_area(sigma, G), "report_delta": 1e-6})
    cost = rel.privacy()
    s = min(sigma)
    assert_tight(cost.epsilon, [("dg", s, 1), ("dg", s, 1)], 1e-6)
    assert cost.epsilon == pytest.approx(tight, abs=0.01)
    assert cost.rho == pytest.approx(1.0 / s ** 2)
    # the same noise written as a G x C table is accounted the same
    table = [list(sigma) for _ in range(G)]
    assert dp.load_release({**small_area(table, G), "report_delta": 1e-6}).privacy().epsilon == pytest.approx(
        cost.epsilon, rel=1e-12)


@pytest.mark.parametrize("G", [1, 2, 5])
def test_small_area_every_noise_spelling_is_accounted_alike(G):
    """One sigma, one per cell, or a G x C table: the same noise gives the same epsilon, never below
    dp-accounting's optimistic value for the two least noisy cells."""
    spellings = [1.5, [1.5, 1.5, 1.5], [[1.5, 1.5, 1.5] for _ in range(G)]]
    eps = [dp.load_release({**small_area(sig, G, C=3), "report_delta": 1e-6}).privacy().epsilon for sig in spellings]
    assert eps[0] == pytest.approx(eps[1], rel=1e-12) and eps[0] == pytest.approx(eps[2], rel=1e-12)
    assert_tight(eps[0], [("dg", 1.5, 1), ("dg", 1.5, 1)], 1e-6)
    mixed = [[3.0, 2.0, 9.0] for _ in range(G)]
    mixed[-1][2] = 1.2
    cost = dp.load_release({**small_area(mixed, G, C=3), "report_delta": 1e-6}).privacy()
    assert_tight(cost.epsilon, [("dg", 1.2, 1), ("dg", 2.0, 1)], 1e-6)


def test_small_area_understated_rho_is_refused():
    with pytest.raises(InputError, match=r"statistics\.counts\.rho.*0\.505.*disagrees"):
        dp.load_release(small_area([1.0, 10.0], 3, rho=0.505))


def test_small_area_one_area_takes_its_two_cells():
    cost = dp.load_release({**small_area([1.0, 10.0], 1), "report_delta": 1e-6}).privacy()
    assert_tight(cost.epsilon, [("dg", 1.0, 1), ("dg", 10.0, 1)], 1e-6)


def test_discrete_gaussian_loss_is_monotone_in_sigma():
    # the worst pair takes the two smallest sigmas: a wider discrete Gaussian never loses more privacy
    for delta in (1e-3, 1e-6, 1e-10):
        eps = [ref_epsilon([("dg", s, 1)], delta)[1] for s in (0.4, 0.7, 1.0, 1.5, 2.5, 4.0, 9.0, 30.0)]
        assert all(a > b for a, b in zip(eps, eps[1:]))


# --------------------------------------------------------------------------- no crash for any valid rho
def _binomial(sigma, n=30):
    return {"format": "dpposterior-release/1", "family": "binomial", "n": n,
            "statistics": {"successes": {"value": 11, "mechanism": "discrete-gaussian", "sigma": sigma}}}


@pytest.mark.parametrize("sigma", [0.05, 35.0, 60.0, 300.0, 5e3, 1e5, 1e8])
def test_any_sigma_gives_a_finite_epsilon(sigma):
    cost = dp.load_release(_binomial(sigma)).privacy()
    # epsilon 0 is right where the total variation distance is below delta (sigma 1e8: ~4e-9 < 1e-6)
    assert math.isfinite(cost.epsilon) and cost.epsilon >= 0 and (cost.epsilon > 0 or sigma > 1e6)
    assert cost.epsilon <= zcdp_epsilon(1 / (2 * sigma ** 2), cost.delta) * (1 + 1e-9)
    multi = {"format": "dpposterior-release/1", "family": "multinomial", "n": 30,
             "statistics": {"counts": {"value": [10, 10, 10], "mechanism": "discrete-gaussian", "sigma": sigma}}}
    assert math.isfinite(dp.load_release(multi).privacy().epsilon)
    assert math.isfinite(dp.load_release(small_area(sigma, 3)).privacy().epsilon)


@pytest.mark.parametrize("rho", [1e-12, 1e-9, 1e-4, 4e-4, 1.0, 200.0, 1e6])
def test_zcdp_conversion_is_finite_for_every_rho(rho):
    eps = zcdp_epsilon(rho, 1e-6)
    assert math.isfinite(eps) and (eps > 0 or rho < 1e-11)  # rho 1e-12 is (0, 1e-6)-DP
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1e6)) + 1e-12  # never above Bun & Steinke's bound


def test_tiny_rho_infers_and_releases(tmp_path):
    from dpposterior.cli import main

    post = dp.infer(_binomial(60.0), prior={"kind": "beta", "alpha": 2, "beta": 3}, seed=1, draws=200)
    assert math.isfinite(post.attrs["release_rho"])
    csv = tmp_path / "x.csv"
    csv.write_text("x\n" + "\n".join(str(i % 2) for i in range(50)) + "\n")
    rc = main(["release", str(csv), "--family", "binomial", "--column", "x", "--mechanism", "discrete-gaussian",
               "--rho", "0.0001", "--seed", "1", "--out", str(tmp_path / "r.json")])
    assert rc in (0, None)
    assert json.loads((tmp_path / "r.json").read_text())["accounting"]["rho"] == pytest.approx(1e-4)


def test_model_with_a_wide_discrete_gaussian_states_its_cost():
    import scipy.stats as st

    model = dp.Model(params={"p": st.beta(1, 1)}, n=20, records=lambda th, size, rng: rng.binomial(1, th["p"], size),
                     statistic=lambda x: x, mechanism=DiscreteGaussian(50.0),
                     record_logpdf=lambda x, th: st.bernoulli.logpmf(x, th["p"]))
    eps, delta = model.mechanism.privacy_cost()
    assert math.isfinite(eps) and 0 < eps < 1


# --------------------------------------------------------------------------- stated privacy checked
def test_gaussian_small_area_stated_privacy_is_checked():
    for sigma in (0.1, 5.0):  # delta ~ 1 and 2.3e-5 really, at the stated epsilon 1
        with pytest.raises(InputError, match=r"statistics\.counts\.delta: 1e-05 is below the delta"):
            dp.load_release(small_area(sigma, 3, mechanism="gaussian", epsilon=1.0, delta=1e-5))
    ok = dp.load_release(small_area(5.0, 3, mechanism="gaussian", epsilon=1.0, delta=3e-5))
    cost = ok.privacy()
    assert cost.delta == 3e-5 and cost.epsilon <= 1.0
    assert_tight(cost.epsilon, [("gauss", 5.0, 1), ("gauss", 5.0, 1)], 3e-5)


def test_gaussian_record_sigma_below_its_claim_is_refused():
    from dpposterior.mechanisms.gaussian import analytic_sigma

    sigma = analytic_sigma(1.0, 1e-5, 1.0)
    base = {"format": "dpposterior-release/1", "family": "gaussian", "n": 43, "bounds": [0.0, 1.0],
            "statistics": {"mean": {"value": 0.5, "mechanism": "laplace", "epsilon": 0.5},
                           "variance": {"value": 0.1, "mechanism": "laplace", "epsilon": 0.5}}}
    rec = {"value": 0.3, "mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5, "sensitivity": 1.0}
    from dpposterior.release import StatisticRecord

    StatisticRecord.model_validate({**rec, "sigma": sigma})
    with pytest.raises(ValueError, match="sigma: .* is smaller than the replace-one sigma"):
        StatisticRecord.model_validate({**rec, "sigma": 0.9 * sigma})
    assert base  # the families that state gaussian records check them the same way on loading


@pytest.mark.parametrize("report_delta", [0.5, 0.9, 1 / 30])
def test_report_delta_at_or_above_one_over_n_is_refused(report_delta):
    with pytest.raises(InputError, match=r"report_delta.*not below 1/n"):
        dp.load_release({**_binomial(2.0), "report_delta": report_delta})


def test_epsilon_at_refuses_delta_outside_the_unit_interval():
    for bad in (1.5, 0.0, -1e-6, 1.0, float("nan")):
        with pytest.raises(InputError, match="delta"):
            DiscreteGaussian(2.0).epsilon_at(bad)


def test_stated_accounting_below_the_noise_is_refused():
    rel = dp.load_release(_binomial(2.0))
    cost = rel.privacy()
    good = {**_binomial(2.0), "accounting": {"epsilon": cost.epsilon, "delta": cost.delta, "rho": cost.rho}}
    dp.load_release(good)
    with pytest.raises(InputError, match=r"accounting\.epsilon.*below"):
        dp.load_release({**good, "accounting": {**good["accounting"], "epsilon": 0.9 * cost.epsilon}})
    with pytest.raises(InputError, match=r"accounting\.rho.*below"):
        dp.load_release({**good, "accounting": {**good["accounting"], "rho": 0.9 * cost.rho}})


# --------------------------------------------------------------------------- tight
def test_vector_release_is_tight():
    multi = {"format": "dpposterior-release/1", "family": "multinomial", "n": 3000, "report_delta": 1e-6,
             "statistics": {"counts": {"value": [1000, 1000, 1000], "mechanism": "discrete-gaussian", "sigma": 1.0}}}
    eps = dp.load_release(multi).privacy().epsilon
    assert eps == pytest.approx(7.00, abs=0.01)  # CKS Cor. 13 gave 7.77
    assert_tight(eps, [("dg", 1.0, 1), ("dg", 1.0, 1)], 1e-6)


def test_mixed_composition_is_tight():
    dg, dl = DiscreteGaussian(3.0), DiscreteLaplace(1.0)
    total = compose([dg.privacy_accounting(1e-6), dl.privacy_accounting(1e-6), dl.privacy_accounting(1e-6)], 1e-6)
    assert total.epsilon == pytest.approx(3.39, abs=0.01)  # the zCDP route gave 8.01
    assert_tight(total.epsilon, [("dg", 3.0, 1), ("dl", 1.0, 1), ("dl", 1.0, 1)], 1e-6)
    assert total.rho == pytest.approx(1 / 18 + 2 * 0.5)


GRID_SIGMA = [0.3, 1.0, 3.0, 30.0, 300.0]
GRID_DELTA = [1e-3, 1e-6, 1e-12]


@pytest.mark.parametrize("sigma", GRID_SIGMA)
@pytest.mark.parametrize("delta", GRID_DELTA)
def test_discrete_gaussian_grid_against_dp_accounting(sigma, delta):
    # one count (exact profile), a multinomial vector (2 coordinates), naive-bayes tables (2K coordinates)
    one = DiscreteGaussian(sigma).epsilon_at(delta)
    assert_tight(one, [("dg", sigma, 1)], delta)
    vec = DiscreteGaussian(sigma, math.sqrt(2.0)).epsilon_at(delta, dim=2)
    assert_tight(vec, [("dg", sigma, 1)] * 2, delta)
    for k in (10, 50):  # statistics composed
        parts = [DiscreteGaussian(sigma).privacy_accounting(delta) for _ in range(k)]
        assert_tight(compose(parts, delta).epsilon, [("dg", sigma, 1)] * k, delta)


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("delta", GRID_DELTA)
def test_discrete_laplace_mixed_with_discrete_gaussian_grid(eps, delta):
    parts = [DiscreteGaussian(3.0).privacy_accounting(delta), DiscreteLaplace(eps).privacy_accounting(delta),
             DiscreteLaplace(eps).privacy_accounting(delta)]
    assert_tight(compose(parts, delta).epsilon, [("dg", 3.0, 1), ("dl", 1 / eps, 1), ("dl", 1 / eps, 1)], delta)


def _release(family, mechanism, scale):
    """A release of ``family`` whose noise has parameter ``scale`` (sigma, or the discrete-Laplace b), and the
    shifts of its worst neighbouring pair written out by hand."""
    if mechanism == "discrete-gaussian":
        noise = lambda sens: {"sigma": scale}  # noqa: E731
    else:
        noise = lambda sens: {"epsilon": sens / scale}  # noqa: E731  b = sensitivity / epsilon
    if family == "binomial":
        return {"format": "dpposterior-release/1", "family": "binomial", "n": 50,
                "statistics": {"successes": {"value": 20, "mechanism": mechanism, **noise(1)}}}, [1]
    if family == "poisson":  # counts clamped to [0, 3]: one record moves the total by 3
        return {"format": "dpposterior-release/1", "family": "poisson", "n": 50, "bounds": [0, 3],
                "statistics": {"truncated_sum": {"value": 60, "mechanism": mechanism, **noise(3)}}}, [3]
    if family == "multinomial":  # a record moved between two categories
        return {"format": "dpposterior-release/1", "family": "multinomial", "n": 50,
                "statistics": {"counts": {"value": [20, 20, 10], "mechanism": mechanism, **noise(2)}}}, [1, 1]
    if family == "naive-bayes":  # a record moves one cell pair in each of the K = 2 tables
        return {"format": "dpposterior-release/1", "family": "naive-bayes", "n": 50, "classes": 2, "levels": [2, 3],
                "statistics": {"tables": {"value": [[[10, 15], [10, 15]], [[5, 10, 10], [10, 5, 10]]],
                                          "mechanism": mechanism, "scale": "counts", **noise(2)}}}, [1] * 4
    raw = small_area(scale, 4)  # a person moved between two cells
    raw["statistics"]["counts"] = {"value": [[5, 5]] * 4, "mechanism": mechanism, **noise(2)}
    return raw, [1, 1]


@pytest.mark.parametrize("family", ["binomial", "poisson", "multinomial", "naive-bayes", "small-area"])
@pytest.mark.parametrize("scale", [0.6, 2.0, 40.0])
def test_every_integer_family_is_tight(family, scale):
    for mechanism in ("discrete-gaussian", "discrete-laplace"):
        raw, shifts = _release(family, mechanism, scale)
        rel = dp.load_release({**raw, "report_delta": 1e-7} if "n" in raw else raw)
        cost = rel.privacy()
        if mechanism == "discrete-laplace":
            # pure epsilon-DP: tight at delta = 0, where the loss is at most sum(shifts) / b
            assert cost.delta == 0 and cost.epsilon == pytest.approx(sum(shifts) / scale, rel=1e-12)
            assert cost.epsilon >= ref_epsilon([("dl", scale, s) for s in shifts], 1e-12)[0] * (1 - 1e-9)
        else:
            assert_tight(cost.epsilon, [("dg", scale, s) for s in shifts], cost.delta)


# --------------------------------------------------------------------------- the curator asks for a target
@pytest.fixture()
def records(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "r.csv"
    rows = ["y,a,b,area,cell,x"] + [f"{rng.integers(2)},{rng.integers(3)},{rng.integers(2)},g{rng.integers(4)},"
                                    f"c{rng.integers(2)},{rng.integers(4)}" for _ in range(120)]
    path.write_text("\n".join(rows) + "\n")
    return path


TARGET_CASES = {
    "binomial": dict(column="y"),
    "poisson": dict(column="x", bounds=(0, 3)),
    "multinomial": dict(column="a"),
    "naive-bayes": dict(columns=["y", "a", "b"]),
    "small-area": dict(area_column="area", cell_column="cell", extra={"areas": ["g0", "g1", "g2", "g3"],
                                                                     "cells": ["c0", "c1"]}),
}


@pytest.mark.parametrize("family", sorted(TARGET_CASES))
@pytest.mark.parametrize("mechanism", ["discrete-gaussian", "discrete-laplace"])
def test_target_epsilon_meets_the_whole_release(records, family, mechanism):
    from dpposterior.curator import CurateOptions, build_release

    opts = dict(TARGET_CASES[family])
    extra = opts.pop("extra", None)
    rel = build_release(records, CurateOptions(family, extra=extra, mechanism=mechanism, target_epsilon=1.0,
                                               delta=1e-8, seed=3, **opts))
    cost = rel.privacy()
    assert cost.epsilon <= 1.0 and cost.epsilon == pytest.approx(1.0, rel=1e-5)
    assert rel.accounting["target"]["epsilon"] == 1.0
    if mechanism == "discrete-gaussian":
        assert cost.delta == 1e-8 and rel.accounting["rho"] == pytest.approx(cost.rho)
        loaded = dp.load_release(json.loads(rel.to_json()))  # the file's accounting is checked on loading
        assert loaded.accounting["epsilon"] == pytest.approx(cost.epsilon)


def test_target_rho_and_refusals(records):
    from dpposterior.curator import CurateOptions, build_release

    rel = build_release(records, CurateOptions("multinomial", column="a", mechanism="discrete-gaussian",
                                               target_rho=0.05, seed=1))
    assert rel.privacy().rho == pytest.approx(0.05, rel=1e-6) and rel.privacy().rho <= 0.05
    with pytest.raises(InputError, match="^rho: give either"):
        build_release(records, CurateOptions("multinomial", column="a", mechanism="discrete-gaussian", rho=0.1,
                                             target_epsilon=1.0))
    with pytest.raises(InputError, match="^target-rho: is the target of --mechanism discrete-gaussian"):
        build_release(records, CurateOptions("multinomial", column="a", mechanism="discrete-laplace", target_rho=1.0))
    with pytest.raises(InputError, match="^target-epsilon: must be a finite number > 0"):
        build_release(records, CurateOptions("binomial", column="y", mechanism="discrete-gaussian",
                                             target_epsilon=-1.0))


@pytest.mark.parametrize("family", ["gaussian", "exponential", "linear-regression", "linreg-ju", "sir", "loglinear"])
def test_target_epsilon_for_every_other_curator(tmp_path, family):
    """The curators with (epsilon, delta) budgets take --target-epsilon too: the whole release meets it (the
    audit's synthetic configuration of each, written to a CSV)."""
    from dpposterior.curator import CurateOptions, build_release
    from dpposterior.privacy import SPECS, _frame

    spec = SPECS[family][0]
    frame = _frame(spec, spec.fixed_rows + [spec.vertices[k % len(spec.vertices)] for k in
                                            range(spec.n - len(spec.fixed_rows))])
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    opts = dict(spec.options)
    extra = opts.pop("extra", None)
    rel = build_release(path, CurateOptions(family, extra=extra, target_epsilon=0.7, seed=2, **opts))
    cost = rel.privacy()
    assert cost.epsilon <= 0.7 * (1 + 1e-12) and cost.epsilon == pytest.approx(0.7, rel=1e-5)
    assert rel.accounting["target"] == {"epsilon": 0.7, "delta": cost.delta}


def test_audit_catches_an_optimistic_accounting(monkeypatch):
    """The audit holds the release's claim against dp-accounting's lower bound at the pair its search found:
    a family whose accounting understated epsilon (as the per-cell small-area bug did) is caught."""
    import dataclasses

    from dpposterior import privacy
    from dpposterior.families import small_area

    honest = privacy.audit("small-area", draws=60, samplers=(), restarts=0, steps=5, seed=1,
                           variants=["small-area"])[0]
    assert honest.pld_epsilon is not None and honest.pld_epsilon <= honest.claimed_epsilon and honest.ok
    real = small_area.SmallAreaRelease.privacy
    monkeypatch.setattr(small_area.SmallAreaRelease, "privacy",
                        lambda self: dataclasses.replace(real(self), epsilon=0.8 * real(self).epsilon))
    caught = privacy.audit("small-area", draws=60, samplers=(), restarts=0, steps=5, seed=1,
                           variants=["small-area"])[0]
    assert caught.claimed_epsilon < caught.pld_epsilon and not caught.ok


# --------------------------------------------------------------------------- exact profile of a worst pair
def _brute_delta(sigma, shifts, epsilon):
    """delta(epsilon) of the product of discrete Gaussians shifted by ``shifts``, summed over the whole grid of
    coordinates (no convolution): max(0, P(k) - e^eps Q(k)) with P = prod N_Z(0, sigma^2), Q shifted."""
    w = int(math.ceil(12 * sigma)) + 4 + max(shifts)
    k = np.arange(-w, w + 1, dtype=float)
    log_z = math.log(np.exp(-np.arange(-10 * w, 10 * w + 1) ** 2 / (2 * sigma ** 2)).sum())
    grids = np.meshgrid(*([k] * len(shifts)), indexing="ij")
    log_p = sum(-g ** 2 / (2 * sigma ** 2) - log_z for g in grids)
    log_q = sum(-(g - mu) ** 2 / (2 * sigma ** 2) - log_z for g, mu in zip(grids, shifts))
    diff = np.exp(log_p) - np.exp(epsilon + log_q)
    return float(diff[diff > 0].sum())


@pytest.mark.parametrize("sigma, shifts, delta", [(0.8, (1, 1), 1e-6), (2.0, (1, 1), 1e-6), (2.0, (2, 1), 1e-9),
                                                  (1.3, (1, 1, 1), 1e-5), (6.0, (1, 1), 1e-3)])
def test_exact_pair_profile_is_the_brute_force_one(sigma, shifts, delta):
    """The worst pair's exact epsilon meets delta on the whole grid of coordinates and is tight there (1e-9 less
    does not), and lies within dp-accounting's optimistic and pessimistic values."""
    from dpposterior.mechanisms.accounting import exact_pair_epsilon

    eps = exact_pair_epsilon(sigma, shifts, delta)
    assert _brute_delta(sigma, shifts, eps) <= delta * (1 + 1e-9)
    assert _brute_delta(sigma, shifts, eps - 1e-9 * max(1.0, eps)) > delta
    # dp-accounting's optimistic value is a lower bound up to its own floating-point error, which reaches 2.5e-9
    # relative at delta = 1e-9 (its delta sums lose ~1e-7 of their value): the brute force above is the strict check
    lo, hi = ref_epsilon([("dg", sigma, mu) for mu in shifts], delta)
    assert lo * (1 - 1e-8) <= eps <= hi * (1 + 1e-9)


def test_small_area_pair_is_accounted_exactly_without_dp_accounting():
    """A one-sigma discrete-Gaussian table's worst pair (two cells shifted by one) is its exact profile, computed
    without importing dp-accounting (whose import is most of a large release's accounting time); two sigmas go to
    dp-accounting's composed loss distributions."""
    import subprocess
    import sys

    code = ("import sys, dpposterior as dp; r = dp.load_release(" + repr({**small_area(2.0, 4), "report_delta": 1e-6})
            + "); c = r.privacy(); print(c.epsilon); print('dp_accounting' in sys.modules); print(c.note)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert float(out[0]) == pytest.approx(3.2921403708, abs=1e-9) and out[1] == "False"
    assert "exact privacy profile of the worst pair" in out[2]
    assert_tight(float(out[0]), [("dg", 2.0, 1), ("dg", 2.0, 1)], 1e-6)
    table = [[3.0, 2.0, 9.0] for _ in range(4)]
    table[-1][2] = 1.2  # the worst pair: this cell (1.2) and a cell of 2.0
    mixed = dp.load_release({**small_area(table, 4, C=3), "report_delta": 1e-6}).privacy()
    assert "dp-accounting" in mixed.note
    assert_tight(mixed.epsilon, [("dg", 1.2, 1), ("dg", 2.0, 1)], 1e-6)
