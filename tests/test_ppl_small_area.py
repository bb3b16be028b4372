"""NUTS on the NC SIDS small-area release with ``dpposterior.ppl.NoisyCount`` against ``exact-da``: the same posterior
within Monte Carlo error (NumPyro here, PyMC as well under ``-m slow``; benchmarks/ppl_small_area.py is the full
comparison).  Statistical on any CPU: z-scores of posterior means against their Monte Carlo standard errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import dpposterior
from dpposterior.convergence import ess_bulk

jax = pytest.importorskip("jax")
pytest.importorskip("numpyro")

ROOT = Path(__file__).resolve().parents[1]
SIDS = ROOT / "examples" / "releases" / "nc-sids-rho0.05.json"


def _benchmark_models():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ppl_small_area", ROOT / "benchmarks" / "ppl_small_area.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def quantities(alpha, tau, u) -> dict[str, np.ndarray]:
    """alpha_c, tau and every rate (per 1,000 births) as (chain, draw) arrays."""
    out = {f"alpha[{c}]": alpha[:, :, c] for c in range(alpha.shape[2])}
    out["tau"] = tau
    rate = np.exp(alpha[:, :, None, :] + u[:, :, :, None]) * 1000
    out.update({f"rate[{g},{c}]": rate[:, :, g, c] for g in range(rate.shape[2]) for c in range(rate.shape[3])})
    return out


def z_scores(a: dict, b: dict) -> dict[str, float]:
    out = {}
    for name in a:
        se2 = sum(x.var() / max(ess_bulk(x), 1.0) for x in (a[name], b[name]))
        out[name] = (a[name].mean() - b[name].mean()) / math.sqrt(se2)
    return out


@pytest.fixture(scope="module")
def reference():
    """exact-da, long: its draws are cheap, so its Monte Carlo error is small beside NUTS's."""
    post = dpposterior.infer(str(SIDS), method="exact-da", seed=5, draws=6000, warmup=1000, chains=4)
    p = post.posterior
    return quantities(np.asarray(p["alpha"]), np.asarray(p["tau"]), np.asarray(p["u"]))


def check_agreement(z: dict[str, float]) -> None:
    # alpha and tau one by one; the 200 rates as a set: |z| > 3.5 has chance 0.05% each, so more than 2 of 200 is
    # a different posterior, not chance
    for name in ("alpha[0]", "alpha[1]", "tau"):
        assert abs(z[name]) < 4.0, (name, z[name])
    rates = np.array([v for k, v in z.items() if k.startswith("rate")])
    assert (np.abs(rates) > 3.5).sum() <= 2, np.sort(np.abs(rates))[-5:]
    assert abs(rates.mean()) < 4.0 / math.sqrt(rates.size) * 3  # no shift of all rates together


def test_numpyro_nuts_with_noisy_count_matches_exact_da_on_nc_sids(reference):
    with jax.enable_x64(True):
        from numpyro.infer import MCMC, NUTS

        from dpposterior.ppl import from_release

        mod = _benchmark_models()
        data = from_release(SIDS)
        model = mod.numpyro_model(data["counts"], data.release.exposures())
        mcmc = MCMC(NUTS(model), num_warmup=400, num_samples=600, num_chains=2, chain_method="sequential",
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(2))
        s = mcmc.get_samples(group_by_chain=True)
        mine = quantities(*(np.asarray(s[k], float) for k in ("alpha", "tau", "u")))
    check_agreement(z_scores(mine, reference))


@pytest.mark.slow
def test_pymc_nuts_with_noisy_count_matches_exact_da_on_nc_sids(reference):
    import pymc as pm

    from dpposterior.ppl import from_release

    mod = _benchmark_models()
    data = from_release(SIDS)
    with mod.pymc_model(data["counts"], data.release.exposures()):
        idata = pm.sample(draws=600, tune=400, chains=2, cores=1, random_seed=2, progressbar=False,
                          compute_convergence_checks=False)
    p = idata.posterior
    mine = quantities(*(np.asarray(p[k], float) for k in ("alpha", "tau", "u")))
    check_agreement(z_scores(mine, reference))


def test_the_agreement_check_rejects_the_model_that_ignores_the_noise(reference):
    """The same NUTS run with the noisy counts taken as true Poisson counts (negatives clipped to 0): the check
    above must fail, or it could not tell the noise-aware model from the naive one."""
    with jax.enable_x64(True):
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import MCMC, NUTS

        from dpposterior.ppl import from_release

        data = from_release(SIDS)
        y, E = np.clip(data["counts"].observed, 0, None), jnp.asarray(data.release.exposures())
        G, C = y.shape

        def naive():
            alpha = numpyro.sample("alpha", dist.Normal(0.0, 10.0).expand([C]).to_event(1))
            tau = numpyro.sample("tau", dist.HalfNormal(1.0))
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([G]).to_event(1))
            numpyro.deterministic("u", tau * z)
            numpyro.sample("y", dist.Poisson(E * jnp.exp(alpha[None, :] + (tau * z)[:, None])).to_event(2), obs=y)

        mcmc = MCMC(NUTS(naive), num_warmup=400, num_samples=600, num_chains=2, chain_method="sequential",
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(2))
        s = mcmc.get_samples(group_by_chain=True)
        mine = quantities(*(np.asarray(s[k], float) for k in ("alpha", "tau", "u")))
    with pytest.raises(AssertionError):
        check_agreement(z_scores(mine, reference))
