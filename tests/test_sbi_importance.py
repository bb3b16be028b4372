"""The importance-sampling correction of SPPE (dpposterior.sbi.importance).

Three checks, as for every engine: a closed form (the conjugate Gaussian mean with a Gaussian
mechanism, and the Gaussian mean with Laplace noise by quadrature), simulation-based calibration
(Talts et al. 2018) that the noise-ignoring posterior fails, and the engine path (run_sppe and
``dpposterior infer``).  Tolerances: the self-normalised importance estimate of a mean has standard
error about sd / sqrt(ESS) (Kish), and n kernel draws add sd / sqrt(n); the tests allow 4.5 of the
combined standard error (two-sided 1e-5 under normality).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from dpposterior.diagnostics.sbi_calibration import (conjugate_gaussian_model, gaussian_laplace_model,
                                                     gaussian_laplace_posterior_moments, rank_result, sbc_checks)
from dpposterior.sbi.flows import FlowConfig
from dpposterior.sbi.importance import (KHAT_THRESHOLD, effective_sample_size, importance_posterior,
                                        kernel_resample, khat_threshold, mixture_log_weights)
from dpposterior.sbi.sppe import run_sppe

Z = 4.5


def pool(model, n_prior, proposal, n_proposal, rng):
    """Round 1 from the prior, round 2 from ``proposal`` (a scipy frozen normal): pooled IS inputs."""
    th1 = model.prior.sample(n_prior, rng)
    th2 = proposal.rvs(size=(n_proposal, 1), random_state=rng)
    theta = np.concatenate([th1, th2])
    s = model.statistics(theta, rng)
    log_prior = model.prior.log_prob(theta)
    log_lik = model.mechanism.logpdf(model.observed[None, :], s).sum(axis=1)
    log_props = np.stack([log_prior, proposal.logpdf(theta[:, 0])])
    return theta, log_prior, log_lik, log_props, np.array([n_prior, n_proposal])


def test_mixture_log_weights_by_hand():
    lw = mixture_log_weights([0.0, -1.0], [-2.0, -3.0], [[0.0, -1.0], [-4.0, 0.5]], [1, 3])
    mix0 = np.log(0.25 * np.exp(0.0) + 0.75 * np.exp(-4.0))
    mix1 = np.log(0.25 * np.exp(-1.0) + 0.75 * np.exp(0.5))
    assert lw == pytest.approx([-2.0 - mix0, -4.0 - mix1])
    assert effective_sample_size(np.log([1.0, 1.0, 2.0])) == pytest.approx(16 / 6)
    with pytest.raises(ValueError, match="2 proposal densities for 3 rounds"):
        mixture_log_weights([0.0], [0.0], [[0.0], [0.0]], [1, 1, 1])


def test_kernel_resample_keeps_the_weighted_mean_and_covariance():
    rng = np.random.default_rng(0)
    theta = rng.standard_normal((500, 2)) @ np.array([[1.0, 0.0], [0.6, 0.5]])
    lw = rng.normal(size=500)
    w = np.exp(lw - logsumexp(lw))
    mean, cov = w @ theta, np.cov(theta.T, aweights=w, bias=True)
    draws = kernel_resample(theta, lw, 200_000, np.random.default_rng(1))
    se = np.sqrt(np.diag(cov) / len(draws))
    assert np.all(np.abs(draws.mean(0) - mean) < Z * se)
    # sample covariance of 2e5 draws: se of a variance ~ var * sqrt(2 / n) (x2 for the heavier-tailed mixture)
    assert np.allclose(np.cov(draws.T), cov, atol=Z * 2 * np.sqrt(2 / len(draws)) * np.diag(cov).max())
    # the kernel is not a no-op: the draws are continuous, not the 500 points
    assert len(np.unique(draws[:, 0])) == len(draws)


def test_conjugate_gaussian_closed_form():
    """theta ~ N(0,1), s ~ N(theta, 0.2^2), s_dp = s + N(0, 0.5^2): exact N(y/(1+v), v/(1+v))."""
    model = conjugate_gaussian_model()
    model.observed = np.array([1.3])
    v = 0.2 ** 2 + 0.5 ** 2
    exact_mean, exact_sd = 1.3 / (1 + v), np.sqrt(v / (1 + v))
    rng = np.random.default_rng(3)
    # a poor second-round proposal (shifted, too wide), as a young flow would be
    inputs = pool(model, 2000, stats.norm(0.3, 1.0), 6000, rng)
    res = importance_posterior(*inputs, n=20_000, rng=rng)
    assert res.reliable and res.khat < KHAT_THRESHOLD
    se = exact_sd * np.sqrt(1 / res.ess + 1 / 20_000)
    assert abs(res.theta.mean() - exact_mean) < Z * se
    assert abs(res.theta.std() / exact_sd - 1) < Z * np.sqrt(1 / (2 * res.ess) + 1 / 40_000) * 2
    # the noise-ignoring posterior N(y/(1+c^2), c^2/(1+c^2)) is far from it
    assert np.sqrt(0.04 / 1.04) < 0.5 * res.theta.std()


def test_gaussian_laplace_against_quadrature():
    """Laplace noise (scale 1) on s ~ N(theta, 0.5^2): the normal-Laplace likelihood by quadrature."""
    model = gaussian_laplace_model()
    model.observed = np.array([2.0])
    (exact_mean,), (exact_sd,) = gaussian_laplace_posterior_moments([2.0])
    rng = np.random.default_rng(4)
    res = importance_posterior(*pool(model, 1000, stats.norm(1.0, 1.2), 4000, rng), n=20_000, rng=rng)
    se = exact_sd * np.sqrt(1 / res.ess + 1 / 20_000)
    assert abs(res.theta.mean() - exact_mean) < Z * se, (res.theta.mean(), exact_mean, se)


def sbc_study(model, datasets: int, draws: int, seed: int, conf_sd: float, posterior):
    """SBC ranks of ``posterior(i, y, rng) -> (draws, 1)`` and of the noise-ignoring posterior
    N(y / (1 + c^2), c^2 / (1 + c^2)) (c = conf_sd, exact for the model without noise) on the same
    releases; returns their sbc_checks (family-wise false-alarm rate 1e-3)."""
    rng = np.random.default_rng(seed)
    truth = model.prior.sample(datasets, rng)
    releases = model.privatize(model.statistics(truth, rng), rng)
    ours, naive = np.empty((datasets, draws, 1)), np.empty((datasets, draws, 1))
    c2 = conf_sd ** 2
    for i in range(datasets):
        model.observed = releases[i]
        y = float(releases[i, 0])
        ours[i] = posterior(i, y, rng)
        naive[i, :, 0] = rng.normal(y / (1 + c2), np.sqrt(c2 / (1 + c2)), size=draws)
    return (sbc_checks(rank_result("sppe-importance", truth, ours, ["mu"], rng), 1e-3),
            sbc_checks(rank_result("naive", truth, naive, ["mu"], rng), 1e-3))


def test_sbc_importance_passes_naive_fails():
    """SBC over L = 400 datasets of the conjugate Gaussian model; per dataset 300 prior simulations and
    600 from a data-dependent proposal N(0.6 y, 0.7^2) (a rough first-round flow).  The ranks must be
    uniform (sbc_checks, family-wise false-alarm rate 1e-3); those of the noise-ignoring posterior
    (exact for the model without noise) must not be."""
    model = conjugate_gaussian_model()

    def weighted(i, y, rng):
        return importance_posterior(*pool(model, 300, stats.norm(0.6 * y, 0.7), 600, rng), n=200,
                                    rng=rng).theta

    checks, naive_checks = sbc_study(model, 400, 200, 11, 0.2, weighted)
    assert all(checks.values()), checks
    assert not any(naive_checks.values()), naive_checks


def test_khat_threshold_depends_on_the_sample_size():
    # Vehtari et al. (2024): min(1 - 1/log10 S, 0.7)
    assert khat_threshold(100) == pytest.approx(0.5)
    assert khat_threshold(1000) == pytest.approx(2 / 3)
    assert khat_threshold(2200) == khat_threshold(10**6) == KHAT_THRESHOLD


def test_no_finite_weight_is_refused():
    with pytest.raises(ValueError, match="no simulation has a finite importance weight"):
        importance_posterior(np.zeros((3, 1)), np.zeros(3), np.full(3, -np.inf), np.zeros((1, 3)), [3], 10,
                             np.random.default_rng(0))


# --------------------------------------------------------------------------- the engine

SMALL = FlowConfig(transforms=2, hidden=(32, 32), max_epochs=30, patience=5)


@pytest.mark.parametrize("proposal", ["atomic", "truncated"])
def test_run_sppe_importance_matches_quadrature(proposal):
    model = gaussian_laplace_model()
    model.observed = np.array([2.0])
    (exact_mean,), (exact_sd,) = gaussian_laplace_posterior_moments([2.0])
    res = run_sppe(model, simulations=400, rounds=3, rqmc_points=4, draws=4000, seed=1, num_atoms=5,
                   config=SMALL, correction="importance", proposal=proposal)
    imp = res.importance
    assert imp is not None and imp.reliable
    assert imp.log_weights.shape == (1200,)
    # the last round only simulates: no training, and its simulations are in the pool
    assert res.rounds[-1]["epochs"] == 0 and res.rounds[-2]["epochs"] > 0
    assert res.data["round"].tolist() == [1] * 400 + [2] * 400 + [3] * 400
    se = exact_sd * np.sqrt(1 / imp.ess + 1 / 4000)
    assert abs(res.theta.mean() - exact_mean) < Z * se, (res.theta.mean(), exact_mean, se)
    # same seed, same draws
    again = run_sppe(model, simulations=400, rounds=3, rqmc_points=4, draws=4000, seed=1, num_atoms=5,
                     config=SMALL, correction="importance", proposal=proposal)
    np.testing.assert_array_equal(res.theta, again.theta)


def test_run_sppe_importance_warns_on_a_large_khat():
    # one round of 40 prior simulations with a release far in the tail: a handful of weights dominate
    model = gaussian_laplace_model(conf_sd=0.05, laplace_scale=0.05)
    model.observed = np.array([2.5])
    with pytest.warns(RuntimeWarning, match=r"k-hat \S+ > 0\.\d\d \(effective sample size"):
        res = run_sppe(model, simulations=40, rounds=1, rqmc_points=2, draws=100, seed=0, config=SMALL,
                       correction="importance")
    assert not res.importance.reliable


def test_auto_falls_back_to_the_flow_exactly_as_none():
    """correction="auto" with an effective sample size below min_ess(d): a RuntimeWarning, the last round's flow is
    fitted and its draws are bit-identical to correction="none" (the weighting draws from its own stream)."""
    model = gaussian_laplace_model(conf_sd=0.05, laplace_scale=0.05)
    model.observed = np.array([2.5])
    kw = dict(simulations=40, rounds=2, rqmc_points=2, draws=100, seed=0, num_atoms=3, config=SMALL)
    with pytest.warns(RuntimeWarning, match="correction not applied"):
        auto = run_sppe(model, correction="auto", **kw)
    none = run_sppe(model, correction="none", **kw)
    assert not auto.importance_applied and none.importance is None and not auto.importance.usable
    np.testing.assert_array_equal(auto.theta, none.theta)
    assert auto.rounds[-1]["epochs"] == none.rounds[-1]["epochs"] > 0


def test_auto_keeps_the_weighted_sample_above_the_ess_floor_despite_a_large_khat():
    """correction="auto" with k-hat above its threshold but ESS >= min_ess(d): the weighted sample, bit-identical
    to correction="importance", with the large-Monte-Carlo-error warning (not the fallback)."""
    from dpposterior.sbi.importance import min_ess

    model = gaussian_laplace_model(conf_sd=0.05, laplace_scale=0.05)
    model.observed = np.array([1.5])
    kw = dict(simulations=80, rounds=2, rqmc_points=2, draws=100, seed=0, num_atoms=3, config=SMALL)
    with pytest.warns(RuntimeWarning, match="large Monte Carlo error") as record:
        auto = run_sppe(model, correction="auto", **kw)
    assert not [w for w in record if "not applied" in str(w.message)]
    with pytest.warns(RuntimeWarning, match="large Monte Carlo error"):
        forced = run_sppe(model, correction="importance", **kw)
    imp = auto.importance
    assert not imp.reliable and imp.usable and imp.min_ess == min_ess(1) == 4.0 and imp.ess >= 4.0
    assert auto.importance_applied and auto.rounds[-1]["epochs"] == 0
    np.testing.assert_array_equal(auto.theta, forced.theta)


def test_engine_defaults_auto_with_the_fast_preset():
    from types import SimpleNamespace

    from dpposterior.sbi.sppe import sppe_on_model

    def options(**extra):
        from dpposterior.sbi.sppe import SppeOptions

        return SppeOptions.from_inference(SimpleNamespace(
            draws=50, chains=1, seed=3, quiet=True,
            extra=dict(simulations=300, rounds=2, max_epochs=2, rqmc_points=2, **extra)), "toy/sppe")

    model = gaussian_laplace_model()
    model.observed = np.array([1.0])
    post = sppe_on_model("toy", model, options())
    assert post.attrs["correction"] == "auto" and post.attrs["training"] == "fast"
    assert post.attrs["importance_applied"] == 1
    assert post.attrs["importance_khat"] <= post.attrs["importance_khat_threshold"] == khat_threshold(600)
    assert post.extras["flow"] is not None   # round 1's flow (the proposal of round 2)
    from dpposterior.checks import flow_warnings

    assert not [w for w in flow_warnings(post) if "importance" in w]
    post.attrs.update(importance_applied=0)   # as after a fallback of "auto"
    assert any(w.startswith("importance correction not applied") for w in flow_warnings(post))
    post.attrs.update(importance_applied=1, importance_khat=0.9)
    assert any("large Monte Carlo error" in w for w in flow_warnings(post))
    plain = sppe_on_model("toy", model, options(correction="none"))
    assert plain.attrs["training"] == "paper" and "importance_ess" not in plain.attrs


def test_run_sppe_rejects_an_unknown_correction():
    with pytest.raises(ValueError, match="correction must be one of"):
        run_sppe(gaussian_laplace_model(), simulations=20, rounds=1, correction="psis")


def test_engine_option_and_attrs(tmp_path):
    from dpposterior import infer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        post = infer("examples/releases/linreg-ju-eps1.json", method="sppe", simulations=200, rounds=2,
                     rqmc_points=2, max_epochs=3, draws=300, chains=1, seed=0, correction="importance",
                     training="fast", quiet=True)
    attrs = post.attrs
    assert attrs["correction"] == "importance"
    assert 1 <= attrs["importance_ess"] <= 400 and np.isfinite(attrs["importance_khat"])


def test_cli_correction_bad_value_exits_2(tmp_path, capsys):
    from dpposterior.cli import main

    path = "examples/releases/linreg-ju-eps1.json"
    for argv, message in ((["--method", "sppe", "--correction", "bogus"], "correction: must be one of auto, importance, none"),
                          (["--method", "sple", "--correction", "importance"],
                           "correction: not an option of linreg-ju/sple")):
        code = main(["infer", path, *argv, "--out", str(tmp_path / "p.nc"), "--quiet"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.startswith(f"error: {message}") and err.count("\n") == 0, err


def test_cli_prints_the_correction_warning_once(tmp_path, capsys, monkeypatch, recwarn):
    """The engine's RuntimeWarning is also in the posterior's warnings: the CLI prints it once, as 'warning: ...'."""
    import dpposterior.api as api
    from dpposterior.cli import main

    real_infer = api.infer

    def infer_with_fallback(*args, **kwargs):
        post = real_infer(*args, **kwargs)
        warnings.warn("SPPE importance correction not applied: PSIS k-hat 0.99 > 0.70", RuntimeWarning)
        warnings.warn("some other engine warning", RuntimeWarning)
        post.attrs.update(importance_applied=0, importance_khat=0.99, importance_khat_threshold=0.7)
        return post

    monkeypatch.setattr(api, "infer", infer_with_fallback)
    code = main(["infer", "examples/releases/linreg-ju-eps1.json", "--method", "sppe", "--simulations", "40",
                 "--rounds", "1", "--rqmc-points", "2", "--draws", "50", "--chains", "1", "--seed", "0", "--no-naive",
                 "--quiet", "--out", str(tmp_path / "p.nc")])
    err = capsys.readouterr().err
    assert code == 0
    # (pytest records Python warnings instead of printing them, so this count alone cannot see the filter:
    # the recwarn check below does)
    assert err.count("importance correction not applied") == 1, err
    assert "warning: importance correction not applied" in err
    # only the repeated warnings are silenced (pytest records the rest instead of printing them)
    messages = [str(w.message) for w in recwarn]
    assert "some other engine warning" in messages
    assert not [m for m in messages if m.startswith("SPPE importance correction")]


@pytest.mark.slow
def test_sbc_of_the_whole_engine_with_the_correction():
    """SBC of run_sppe(correction="importance") itself -- flows as proposals, then the weighting -- on the
    Gaussian-Laplace toy: L = 150 datasets, 2 rounds x 300 simulations each.  Ranks uniform (sbc_checks,
    family-wise false-alarm rate 1e-3); the noise-ignoring exact posterior on the same releases fails."""
    model = gaussian_laplace_model()

    def engine(i, y, rng):
        return run_sppe(model, simulations=300, rounds=2, rqmc_points=4, draws=200, seed=100 + i, num_atoms=5,
                        config=SMALL, correction="importance").theta

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        checks, naive_checks = sbc_study(model, 150, 200, 21, 0.5, engine)
    assert all(checks.values()), checks
    assert not any(naive_checks.values()), naive_checks
