"""The Gibbs-SS sigma^2 update never divides by zero (and is the right law).

numpy's ``wald(mu, lam)`` returns exactly 0 once mu/lam > ~1e15, i.e. when an imputed
statistic s lands within ~1e-15 b of the release y; ``1 / wald`` was the
ZeroDivisionError that killed ``dpposterior calibrate --family binomial --n 50
--epsilon 0.5 --trials 3000 --methods gibbs-ss,naive --seed 9``.
"""

import numba
import numpy as np
import pytest
from scipy import stats

from dpposterior.execution import spawn_seeds
from dpposterior.families import get_family
from dpposterior.inference import gibbs_ss as G


@numba.njit
def _draw_sigma2(y, s, b, size, seed):
    np.random.seed(seed)
    out = np.empty(size)
    for k in range(size):
        out[k] = G._sigma2(y, s, b)
    return out


@pytest.mark.parametrize("z,b", [(0.3, 2.0), (5.0, 0.5), (1e-3, 20.0), (40.0, 1.0)])
def test_sigma2_matches_the_wald_law(z, b):
    """1/sigma^2 ~ Wald(mean 1/(b z), shape 1/b^2): KS against scipy's inverse Gaussian."""
    w = 1.0 / _draw_sigma2(1.0 + z, 1.0, b, 20000, 123)
    mu, lam = 1.0 / (b * z), 1.0 / b ** 2
    ks = stats.kstest(w, stats.invgauss(mu / lam, scale=lam).cdf)
    assert ks.pvalue > 1e-3, ks


@pytest.mark.parametrize("z", [0.0, 1e-300, 1e-200, 1e-16, 1e-12])
def test_sigma2_finite_and_levy_limit_when_s_equals_y(z):
    """As z -> 0 the law tends to sigma^2 = b^2 Y, Y ~ chi^2_1 (Levy); never 0, never inf."""
    b = 2.0
    s2 = _draw_sigma2(3.0 + z, 3.0, b, 20000, 7)
    assert np.all(np.isfinite(s2)) and np.all(s2 > 0)
    ks = stats.kstest(s2 / b ** 2, stats.chi2(1).cdf)
    assert ks.pvalue > 1e-3, ks


def test_issue16_failing_batch_now_runs():
    """The exact batch of the issue's study that raised ZeroDivisionError (unit 10 of seed 9
    under the former 250-trial units): it now returns finite draws."""
    fam = get_family("binomial")
    prior = fam.parse_prior(None, None)
    ss = spawn_seeds(9, 12)[10]
    sim_ss, _rank_ss, gibbs_ss_seed, *_ = ss.spawn(5)
    rng = np.random.default_rng(sim_ss)
    sims = [fam.simulate(prior, 50, 0.5, rng) for _ in range(250)]
    y = np.array([sim.release.released[0] for sim in sims])
    scale = np.array([sim.release.laplace_scale for sim in sims])
    out = G.sample_batch("binomial", y, np.full(250, 50.0), scale, prior, warmup=2000, draws=5000,
                         seed=gibbs_ss_seed)
    assert np.all(np.isfinite(out["theta"])) and np.all((out["theta"] >= 0) & (out["theta"] <= 1))


@pytest.mark.slow
def test_issue16_command_completes(tmp_path):
    from dpposterior.cli import main

    out = tmp_path / "cal.json"
    assert main(["calibrate", "--family", "binomial", "--n", "50", "--epsilon", "0.5", "--trials", "3000",
                 "--methods", "gibbs-ss,naive", "--seed", "9", "--out", str(out), "--quiet"]) == 0
    import json

    result = json.loads(out.read_text())
    assert result["trials"] == 3000 and result.get("failed_trials", 0) == 0
    assert result["methods"]["gibbs-ss"]["ks_pvalue"] > 0.01
