"""Simulation-based calibration (Talts et al. 2018) of the SBI engines, and the naive method.

Amortised SBC (``dpposterior.diagnostics.sbi_calibration``): SPPE's round-1 flow q(theta | s_dp) is trained
once on prior simulations and conditioned on L simulated releases; the ranks of the true
theta* must be uniform.  The same study must FAIL for the noise-ignoring NPE (``naive``),
the flow trained on the confidential s and conditioned on the same noisy releases.
SMC-ABC (not amortised) is rerun on each of a few hundred datasets.

Tolerances (``sbc_checks``): given the trained flow the L ranks are i.i.d., so under
calibration the count of datasets whose theta* lies in the central c-interval is
Binomial(L, c): empirical coverage c +- z sqrt(c (1 - c) / L), and the KS p-value is
Uniform(0, 1).  With k checks per method (3 coverage levels + KS, per parameter) and a
Bonferroni split of a family-wise false-alarm rate alpha = 1e-3, z = Phi^-1(1 - alpha/(2k))
(k = 4: z = 3.66; L = 1000: +-0.058 at c = 0.5, +-0.035 at 0.9, +-0.025 at 0.95) and the KS
check is p > alpha / k.  Seeds are fixed, so each test is deterministic; the rates bound the
chance that a calibrated engine would have failed with the chosen seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpposterior.cli import main
from dpposterior.errors import InputError
from dpposterior.mechanisms import BinomialTrajectory, Laplace
from dpposterior.sbi import NoiseIgnored
from dpposterior.diagnostics.sbi_calibration import (COVERAGE_LEVELS, amortized_sbc, conjugate_gaussian_model,
                                         coverage_tolerance, familywise_z, gaussian_laplace_model,
                                         gaussian_laplace_posterior_sd,
                                         release_model, sbc_checks, smc_abc_sbc)
from dpposterior.sbi.flows import FlowConfig

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "releases"
ALPHA = 1e-3


# --------------------------------------------------------------------------- the noise-ignoring model

def test_noise_ignored_mechanism_is_the_noise_free_release():
    rng = np.random.default_rng(0)
    s = np.array([[0.3, -1.2], [2.0, 0.5]])
    none = NoiseIgnored(Laplace(1.0, 1.0))
    assert np.array_equal(none.sample(s, rng), s)
    u = rng.random((2, 4, 2))
    out = none.transform(u, s[:, None, :])
    assert out.shape == (2, 4, 2) and np.array_equal(out, np.broadcast_to(s[:, None, :], (2, 4, 2)))
    # binomial trajectory: counts out of K are released as proportions; ignoring DP means I(t) / K
    traj = NoiseIgnored(BinomialTrajectory(population=1000, trials=100, points=2, epsilon=1.0))
    assert np.allclose(traj.sample(np.array([10.0, 500.0])), [0.01, 0.5])
    assert traj.privacy_cost()[0] == np.inf
    assert np.array_equal(none.logpdf(s, s), np.zeros_like(s))


def test_without_noise_leaves_the_model_alone():
    model = gaussian_laplace_model()
    naive = model.without_noise()
    assert isinstance(naive.mechanism, NoiseIgnored) and isinstance(model.mechanism, Laplace)
    assert naive.without_noise() is naive
    assert naive.prior is model.prior and np.array_equal(naive.observed, model.observed)


# --------------------------------------------------------------------------- the naive engine

def test_naive_is_registered_for_every_sbi_family():
    from dpposterior.families import get_family

    for name in ("linreg-ju", "sir", "loglinear"):
        family = get_family(name)
        assert family.naive_method == "naive" and "naive" in family.methods
        assert family.engine("naive").__name__ == "naive"


def test_cli_infer_method_naive_writes_the_contract_variables(tmp_path):
    import arviz as az

    analysis = tmp_path / "a.toml"
    analysis.write_text("max_epochs = 5\n")
    out = tmp_path / "naive.nc"
    assert main(["infer", str(EXAMPLES / "linreg-ju-eps1.json"), "--method", "naive", "--simulations", "200",
                 "--draws", "100", "--chains", "2", "--seed", "3", "--analysis", str(analysis), "--quiet",
                 "--out", str(out)]) == 0
    idata = az.from_netcdf(out)
    assert idata.posterior["beta"].dims == ("chain", "draw", "coef") and idata.posterior["beta"].shape == (2, 100, 3)
    assert idata.posterior.attrs["method"] == "naive" and idata.posterior.attrs["noise_ignored"] == 1
    # the eps = 1 release lies far outside every noise-free statistic (x~'x~/n entries off by ~0.1-0.4
    # against a spread of ~0.003): the naive flow extrapolates, and the attrs say so
    assert idata.posterior.attrs["release_zscore_max"] > 20


def test_naive_api_options_and_errors():
    from dpposterior.inference import infer

    kw = dict(method="naive", simulations=40, max_epochs=2, draws=20, chains=1, seed=4)
    sir = infer(EXAMPLES / "sir-eps10.json", **kw)
    assert set(sir.posterior) == {"log_beta", "log_gamma", "R0"}
    a = infer(EXAMPLES / "loglinear-eps10.json", **kw)
    assert set(a.posterior) == {"class_prob", "feature_prob"}
    b = infer(EXAMPLES / "loglinear-eps10.json", **kw)
    assert np.array_equal(a.posterior["feature_prob"], b.posterior["feature_prob"])  # same seed, same draws
    # there is no noise to integrate: RQMC options are refused with a one-line error
    with pytest.raises(InputError, match="rqmc_points"):
        infer(EXAMPLES / "linreg-ju-eps10.json", method="naive", rqmc_points=4)
    with pytest.raises(InputError, match="simulations"):
        infer(EXAMPLES / "linreg-ju-eps10.json", method="naive", simulations=5)


# --------------------------------------------------------------------------- the tolerances

def test_tolerance_derivation_numbers():
    # the values quoted in the module docstring
    z = familywise_z(4, ALPHA)
    assert z == pytest.approx(3.66, abs=0.01)
    assert [round(coverage_tolerance(c, 1000, z), 3) for c in COVERAGE_LEVELS] == [0.058, 0.035, 0.025]


def test_sbc_checks_accept_uniform_ranks_and_reject_overconfident_ones():
    from dpposterior.diagnostics.sbi_calibration import rank_result

    rng = np.random.default_rng(5)
    truth = rng.normal(size=(1000, 1))
    # draws theta* + N(0, 1): given the draws' centre c, theta* ~ N(c, 1) like the draws (exchangeable)
    exact = truth[:, None, :] + rng.normal(size=(1000, 1, 1)) + rng.normal(size=(1000, 300, 1))
    assert all(sbc_checks(rank_result("exact", truth, exact, ["mu"], rng), ALPHA).values())
    # overconfident: the centre is off by 3 posterior sd on average
    narrow = truth[:, None, :] + 3.0 * rng.normal(size=(1000, 1, 1)) + rng.normal(size=(1000, 300, 1))
    checks = sbc_checks(rank_result("narrow", truth, narrow, ["mu"], rng), ALPHA)
    assert not any(checks.values())


# --------------------------------------------------------------------------- amortised SBC (fast)

#: a small flow (the SBC proves the calibration of *this* trained estimator)
SMALL_FLOW = FlowConfig(transforms=2, hidden=(32, 32), max_epochs=40, patience=10)


def test_amortised_sbc_sppe_round1_passes_naive_fails():
    """Gaussian mean, Laplace noise sd 1.41 vs no-noise posterior sd 0.45: L = 1000 datasets.

    Naive expectation (Gaussian approximation): its posterior N(0.8 s_dp, 0.2) conditioned on
    s_dp = theta + e, var(e) = 0.25 + 2, has error var 0.04 + 0.64 * 2.25 = 1.48 vs the claimed
    0.2: z-scores with sd 2.7, so its 50/90/95% intervals cover ~0.20/0.45/0.53 -- far outside the
    +-0.058/0.035/0.025 bands.
    """
    model = gaussian_laplace_model()
    res = amortized_sbc(model, datasets=1000, draws=300, simulations=2000, rqmc_points=8, seed=2,
                        config=SMALL_FLOW)
    sppe, naive = res["sppe-round1"], res["naive"]
    sppe_checks = sbc_checks(sppe, ALPHA)
    assert all(sppe_checks.values()), (sppe_checks, sppe.summary)
    naive_checks = sbc_checks(naive, ALPHA)
    assert not any(naive_checks.values()), (naive_checks, naive.summary)
    # the failure is overconfidence: every central interval covers far less than nominal
    for c in COVERAGE_LEVELS:
        assert naive.coverage(c) < c - coverage_tolerance(c, 1000, familywise_z(4, ALPHA))
    # SBC cannot see sharpness (the prior itself is calibrated), so also compare the posterior sd with
    # the exact one (quadrature, same releases; its mean is ~0.82 vs the prior's 1 and the naive 0.45).
    # The allowance is flow-fit error, not Monte Carlo (se of the mean ratio over 1000 datasets with
    # 300 draws each is < 0.003): 10%, as for the 1-d SPPE quadrature test in test_sbi.py.
    exact = gaussian_laplace_posterior_sd(sppe.info["releases"][:, 0])
    ratio = np.mean(sppe.info["posterior_sd"][:, 0] / exact)
    assert abs(ratio - 1) < 0.10, ratio
    assert np.mean(naive.info["posterior_sd"][:, 0] / exact) < 0.7


# --------------------------------------------------------------------------- SMC-ABC SBC (fast)

def test_smc_abc_sbc_conjugate_gaussian_is_not_overconfident_naive_is():
    """theta ~ N(0,1), s ~ N(theta, 0.2^2), Gaussian noise sd 0.5; 200 datasets, 4,000 simulations each.

    ABC accepts |s_dp - s_dp^o| <= h, i.e. it targets the posterior under the extra noise
    U(-h, h) (variance h^2/3): it is conservative by design, so only the lower one-sided
    coverage checks apply (``lower_only``).  So that a too-wide posterior (e.g. the prior) cannot
    pass, its mean posterior sd must stay within the kernel inflation at the largest final
    tolerance plus 5 Monte Carlo standard errors of the exact sd (v = 0.29: sd 0.474).
    """
    model = conjugate_gaussian_model()
    L = 200
    res = smc_abc_sbc(model, datasets=L, draws=400, simulations=4000, particles=200, seed=1)
    abc, naive = res["smc-abc"], res["naive-abc"]
    assert all(sbc_checks(abc, ALPHA, lower_only=True).values()), abc.summary
    # the naive ABC fails the one-sided check too (and the two-sided test)
    assert not any(sbc_checks(naive, ALPHA, lower_only=True).values()), naive.summary
    assert not any(sbc_checks(naive, ALPHA).values())
    v = 0.2 ** 2 + 0.5 ** 2
    exact_sd = np.sqrt(v / (1 + v))
    ratio = abc.info["posterior_sd"][:, 0] / exact_sd
    h = abc.info["final_tolerance"].max()
    inflation = np.sqrt((v + h * h / 3) / (1 + v + h * h / 3)) / exact_sd
    se = ratio.std(ddof=1) / np.sqrt(L)
    assert 1 - 5 * se < ratio.mean() < inflation + 5 * se, (ratio.mean(), inflation, se)
    # the noise-ignoring posterior is ~2.4x too narrow (exact naive sd (1 + 25)^-1/2 = 0.196)
    assert naive.info["posterior_sd"].mean() < 0.6 * exact_sd


# --------------------------------------------------------------------------- slow, fuller studies

@pytest.mark.slow
def test_amortised_sbc_linreg_ju_eps1():
    """linreg-ju at eps = 1 (Laplace scale 0.13 on statistics of size ~0.01-0.3): 3 parameters,
    k = 12 checks per method (z = 3.94; L = 1000: +-0.062 / 0.037 / 0.027)."""
    model = release_model(EXAMPLES / "linreg-ju-eps1.json")
    config = FlowConfig(transforms=5, hidden=(50, 50), max_epochs=100, patience=20)
    res = amortized_sbc(model, datasets=1000, draws=300, simulations=5000, rqmc_points=8, seed=0, config=config)
    sppe_checks = sbc_checks(res["sppe-round1"], ALPHA)
    assert all(sppe_checks.values()), (sppe_checks, res["sppe-round1"].summary)
    naive_checks = sbc_checks(res["naive"], ALPHA)
    assert not any(naive_checks.values()), (naive_checks, res["naive"].summary)


@pytest.mark.slow
def test_amortised_sbc_gaussian_laplace_full():
    """The fast toy study with the paper's flow (8 transforms), 4,000 simulations and L = 4,000
    datasets: bands half as wide (+-0.029 / 0.017 / 0.013)."""
    model = gaussian_laplace_model()
    res = amortized_sbc(model, datasets=4000, draws=300, simulations=4000, rqmc_points=8, seed=0,
                        config=FlowConfig(max_epochs=100))
    assert all(sbc_checks(res["sppe-round1"], ALPHA).values()), res["sppe-round1"].summary
    assert not any(sbc_checks(res["naive"], ALPHA).values()), res["naive"].summary


@pytest.mark.slow
def test_smc_abc_sbc_conjugate_gaussian_full():
    model = conjugate_gaussian_model()
    res = smc_abc_sbc(model, datasets=1000, draws=400, simulations=10_000, particles=300, seed=0)
    assert all(sbc_checks(res["smc-abc"], ALPHA, lower_only=True).values()), res["smc-abc"].summary
    assert not any(sbc_checks(res["naive-abc"], ALPHA, lower_only=True).values())
