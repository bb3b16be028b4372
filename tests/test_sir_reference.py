"""The SIR reference posterior by time change (dpposterior.diagnostics.sir_reference).

Small populations keep every simulation cheap; the identities checked do not depend on K.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from dpposterior.diagnostics.sir_reference import grid_posterior, time_change_log_likelihoods
from dpposterior.mechanisms import BinomialTrajectory
from dpposterior.sbi import GaussianPrior
from dpposterior.sbi.sir_simulator import simulate_sir

K = 400
TIMES = np.array([0.0, 4.0, 8.0, 12.0, 16.0, 24.0])


def test_time_change_matches_direct_simulation_in_distribution():
    """I_{beta,gamma}(t) and I_{beta/gamma,1}(gamma t) have the same law at every t (two-sample KS,
    familywise 1e-3 over the time points); reading it at times 10% off does not."""
    beta, gamma, n = 0.9, 0.3, 3000
    direct = simulate_sir(np.full(n, beta), np.full(n, gamma), np.random.default_rng(1), population=K,
                          times=TIMES)
    scaled = simulate_sir(np.full(n, beta / gamma), np.ones(n), np.random.default_rng(2), population=K,
                          times=gamma * TIMES)
    unscaled = simulate_sir(np.full(n, beta / gamma), np.ones(n), np.random.default_rng(2), population=K,
                            times=1.1 * gamma * TIMES)   # a time scale 10% off
    alpha = 1e-3 / (len(TIMES) - 1)
    for j in range(1, len(TIMES)):
        assert stats.ks_2samp(direct[:, j], scaled[:, j]).pvalue > alpha, j
    assert min(stats.ks_2samp(direct[:, j], unscaled[:, j]).pvalue for j in range(1, len(TIMES))) < alpha


def test_grid_likelihood_agrees_with_direct_estimate_at_every_gamma():
    """The time-change estimate of p(s | R0, gamma_j) and the direct one (simulating at
    beta = R0 gamma_j, gamma_j) are both unbiased: they agree within 4 combined standard errors."""
    mech = BinomialTrajectory(population=K, trials=10, points=len(TIMES), epsilon=20.0)
    truth = simulate_sir([1.0], [0.4], np.random.default_rng(3), population=K, times=TIMES)[0]
    observed = mech.sample(truth, np.random.default_rng(4))
    log_r0, log_gamma = np.log(2.5), np.log([0.35, 0.4, 0.45])
    n = 4000
    grid_ll = time_change_log_likelihoods(log_r0, log_gamma, observed, mech, TIMES, n, np.random.default_rng(5))
    assert grid_ll.shape == (n, 3)
    for j, lg in enumerate(log_gamma):
        g = np.exp(lg)
        sims = simulate_sir(np.full(n, np.exp(log_r0) * g), np.full(n, g), np.random.default_rng(10 + j),
                            population=K, times=TIMES)
        direct_ll = mech.logpdf(observed, sims).sum(-1)
        est = []
        for ll in (grid_ll[:, j], direct_ll):
            w = np.exp(ll - ll.max())
            est.append((w.mean() * np.exp(ll.max()), w.std() / np.sqrt(n) * np.exp(ll.max())))
        (a, sa), (b, sb) = est
        assert sa < 0.1 * a and sb < 0.1 * b   # enough effective trajectories for a meaningful comparison
        assert abs(a - b) < 4 * np.hypot(sa, sb), (j, a, b, sa, sb)


def test_grid_posterior_recovers_a_conjugate_gaussian():
    """With a Gaussian 'likelihood' in (log beta, log gamma) the grid posterior (over log R0, log gamma)
    has the conjugate posterior's moments: checks the change of variables and the prior's placement."""
    prior = GaussianPrior([-0.9, -2.1], [[0.5, 0.0], [0.0, 0.2]])
    like_mean, like_cov = np.array([-0.5, -3.0]), np.array([[0.01, 0.002], [0.002, 0.004]])
    post_cov = np.linalg.inv(np.linalg.inv(prior.cov) + np.linalg.inv(like_cov))
    post_mean = post_cov @ (np.linalg.solve(prior.cov, prior.mean) + np.linalg.solve(like_cov, like_mean))
    log_r0, log_gamma = np.linspace(1.5, 3.5, 201), np.linspace(-3.5, -2.5, 201)
    a, g = np.meshgrid(log_r0, log_gamma, indexing="ij")
    th = np.column_stack([(a + g).ravel(), g.ravel()])
    loglik = stats.multivariate_normal(like_mean, like_cov).logpdf(th).reshape(a.shape)
    # as from 10 trajectories each: the sum of their likelihoods is 10 x the mean
    post = grid_posterior(log_r0, log_gamma, loglik + np.log(10), np.full(len(log_r0), 10), prior)
    mean, sd = post.moments()
    np.testing.assert_allclose(mean, post_mean, atol=1e-3 * np.sqrt(np.diag(post_cov)).max())
    np.testing.assert_allclose(sd, np.sqrt(np.diag(post_cov)), rtol=1e-3)
    np.testing.assert_allclose(post.log_likelihood, loglik, atol=1e-12)
    draws = post.sample(40_000, np.random.default_rng(0))
    se = np.sqrt(np.diag(post_cov) / len(draws))
    assert np.all(np.abs(draws.mean(0) - post_mean) < 4.5 * se)
    # the within-cell jitter adds (step^2 / 12) of variance per grid axis: negligible here
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.02)


def post_prior():
    return GaussianPrior([-0.9, -2.1], [[0.5, 0.0], [0.0, 0.2]])


def test_length_mismatch_is_refused():
    mech = BinomialTrajectory(population=K, trials=50, points=len(TIMES), epsilon=20.0)
    with pytest.raises(ValueError, match="one value per time"):
        time_change_log_likelihoods(1.0, [0.0], np.zeros(3), mech, TIMES, 2, np.random.default_rng(0))


def test_reference_posterior_is_the_assembled_grid_and_the_docs_example_runs():
    import re
    from pathlib import Path

    from dpposterior.diagnostics.sir_reference import reference_posterior
    from dpposterior.families.sir import SIRRelease, make_release

    text = (Path(__file__).resolve().parents[1] / "docs" / "sbi.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "sir-reference example" in b)
    namespace: dict = {}
    exec(compile(block, "docs/sbi.md", "exec"), namespace)   # noqa: S102 - our own documentation
    mean, sd = namespace["mean"], namespace["sd"]
    assert np.all(np.isfinite(mean)) and np.all(sd > 0)

    release = SIRRelease.model_validate(make_release([0.2, 0.5, 0.3], epsilon=20.0, trials=100, population=300,
                                                     times=[0.0, 10.0, 20.0]))
    log_r0, log_gamma = np.array([1.0, 1.5]), np.linspace(-2.5, -1.5, 5)
    post = reference_posterior(release, log_r0, log_gamma, 7, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    rows = [logsumexp(time_change_log_likelihoods(a, log_gamma, release.statistics.infected.array(),
                                                  release.mechanism(), np.asarray(release.times), 7, rng), 0)
            for a in log_r0]
    np.testing.assert_allclose(post.log_likelihood, np.array(rows) - np.log(7))
    with pytest.raises(ValueError, match="trajectories"):
        reference_posterior(release, log_r0, log_gamma, 0, rng)
    with pytest.raises(ValueError, match="log_gamma must be an increasing, evenly spaced grid"):
        reference_posterior(release, log_r0, np.array([-2.5, -2.4, -2.0]), 1, rng)
    with pytest.raises(ValueError, match="positive count for every log_r0 row"):   # a row with no trajectories
        grid_posterior(log_r0, log_gamma, np.zeros((2, 5)), np.array([7.0, 0.0]), post_prior())
    with pytest.raises(ValueError, match=r"shape \(2, 5\)"):
        grid_posterior(log_r0, log_gamma, np.zeros((5, 2)), np.array([7.0, 7.0]), post_prior())
