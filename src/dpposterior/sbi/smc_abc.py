"""SMC-ABC for DP releases (Xiong, Ju & Zhang App. C, Algorithm 3; Beaumont et al. 2009).

Population of N weighted particles.  Generation t proposes theta** by picking
theta* from the previous population with its weights and perturbing it with a
Gaussian kernel of twice the weighted covariance (Beaumont et al. 2009), simulates
s_dp** = eta(s(x**)) with x** ~ f(. | theta**) and keeps it when
rho(s_dp**, s_dp^o) = ||s_dp** - s_dp^o||_2 <= eps_t.  Weights
W_t^(i) = pi(theta_t^(i)) / sum_j W_{t-1}^(j) K_t(theta_t^(i) | theta_{t-1}^(j)); resampling
when ESS < N/2.  Tolerances: ``fixed`` eps_t = 0.5 * 0.7^t (the paper's SIR
setting) or ``adaptive`` (the ``quantile`` of the previous population's
distances; generation 1 accepts the N prior draws).  Proposals are simulated in
vectorised batches; the run stops when the simulation budget is spent and
returns the last complete population.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from scipy import special

from ..errors import InputError, RefusedError
from ..options import EngineOptions, option
from . import common


@dataclass
class SMCABCResult:
    theta: np.ndarray            # (N, d) final population
    weights: np.ndarray          # (N,) normalised
    distances: np.ndarray        # (N,)
    tolerance: float
    simulations: int
    generations: list = field(default_factory=list)

    def resample(self, n: int, rng) -> np.ndarray:
        """Systematic resampling of the weighted population to n draws."""
        return self.theta[systematic_indices(self.weights, n, rng)]


def systematic_indices(weights, n, rng) -> np.ndarray:
    cum = np.cumsum(weights)
    cum[-1] = 1.0
    u = (rng.random() + np.arange(n)) / n
    return np.searchsorted(cum, u)


def _kernel_logpdf_matrix(new, old, chol_inv, log_norm):
    """log N(new_i | old_j, Sigma) for all i, j; chol_inv = L^-1 of Sigma."""
    diff = new[:, None, :] - old[None, :, :]
    z = diff @ chol_inv.T
    return log_norm - 0.5 * np.sum(z * z, axis=-1)


#: the largest batch of proposals simulated at once, in populations
BATCH_POPULATIONS = 20


def run_smc_abc(model, simulations: int = 50_000, particles: int = 1000, tolerance: str = "adaptive",
                quantile: float = 0.5, seed: int = 0, quiet: bool = True, max_generations: int = 1000) -> SMCABCResult:
    """Algorithm 3 with a total simulation budget ``simulations``."""
    if tolerance not in ("adaptive", "fixed"):
        raise InputError("tolerance", "must be 'adaptive' or 'fixed'")
    if simulations < particles:
        raise InputError("simulations", f"the budget must cover at least one population ({particles})")
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    d = model.dim
    observed = model.observed

    def distance(theta):
        sdp = model.privatize(model.statistics(theta, rng), rng)
        return np.sqrt(np.sum((sdp - observed) ** 2, axis=1))

    used = 0
    gens = []
    # generation 1 from the prior
    eps = 0.5 * 0.7 if tolerance == "fixed" else np.inf
    theta_acc, dist_acc = [], []
    n_acc = 0
    batch = particles
    while n_acc < particles:
        if used + batch > simulations:
            batch = simulations - used
            if batch <= 0:
                raise RefusedError("simulations", f"budget spent before the first population was complete "
                                                  f"(tolerance {eps:g}); raise --simulations or use adaptive")
        th = model.prior.sample(batch, rng)
        dist = distance(th)
        used += batch
        ok = dist <= eps
        theta_acc.append(th[ok])
        dist_acc.append(dist[ok])
        n_acc += int(ok.sum())
        rate = max(n_acc, 1) / used
        batch = int(min(max((particles - n_acc) / rate * 1.2, 100), BATCH_POPULATIONS * particles))
    theta = np.concatenate(theta_acc)[:particles]
    dists = np.concatenate(dist_acc)[:particles]
    weights = np.full(particles, 1.0 / particles)
    gens.append({"generation": 1, "tolerance": float(eps), "simulations": used, "acceptance": particles / used})

    t = 1
    done = False
    while not done and t < max_generations:
        t += 1
        eps = 0.5 * 0.7 ** t if tolerance == "fixed" else float(np.quantile(dists, quantile))
        mean = weights @ theta
        cov = 2.0 * ((theta - mean).T * weights) @ (theta - mean)
        cov += 1e-12 * np.eye(d) * max(np.trace(cov), 1e-12)
        chol = np.linalg.cholesky(cov)
        chol_inv = np.linalg.inv(chol)
        log_norm = -0.5 * d * np.log(2 * np.pi) - np.sum(np.log(np.diag(chol)))
        new_theta, new_dist = [], []
        n_acc = 0
        gen_used = 0
        batch = particles
        while n_acc < particles:
            batch = min(batch, simulations - used)
            if batch <= 0:
                done = True
                break
            pick = rng.choice(particles, size=batch, p=weights)
            th = theta[pick] + rng.standard_normal((batch, d)) @ chol.T
            dist = distance(th)
            used += batch
            gen_used += batch
            ok = (dist <= eps) & np.isfinite(model.prior.log_prob(th))
            new_theta.append(th[ok])
            new_dist.append(dist[ok])
            n_acc += int(ok.sum())
            rate = max(n_acc, 1) / gen_used
            batch = int(min(max((particles - n_acc) / rate * 1.2, 100), BATCH_POPULATIONS * particles))
        if done:
            break
        th_new = np.concatenate(new_theta)[:particles]
        logw = model.prior.log_prob(th_new) - special.logsumexp(
            _kernel_logpdf_matrix(th_new, theta, chol_inv, log_norm), b=weights[None, :], axis=1)
        w = np.exp(logw - logw.max())
        w /= w.sum()
        theta, dists, weights = th_new, np.concatenate(new_dist)[:particles], w
        ess = 1.0 / np.sum(weights ** 2)
        resampled = ess < particles / 2
        if resampled:
            idx = systematic_indices(weights, particles, rng)
            theta, dists = theta[idx], dists[idx]
            weights = np.full(particles, 1.0 / particles)
        gens.append({"generation": t, "tolerance": float(eps), "simulations": used,
                     "acceptance": particles / gen_used, "ess": float(ess), "resampled": bool(resampled)})
    return SMCABCResult(theta=theta, weights=weights, distances=dists, tolerance=gens[-1]["tolerance"],
                        simulations=used, generations=gens)


@dataclass(frozen=True)
class SmcAbcOptions(EngineOptions):
    """Options of engine ``smc-abc`` (families and user Models): draws, chains, seed (draws resampled from
    the final population); ``simulations`` (total budget), ``particles`` (N), the ``tolerance`` schedule and
    its ``quantile``."""

    engine: ClassVar[str] = "smc-abc"

    simulations: int = option(50_000, "int", "total simulation budget", low=1)
    particles: int = option(1000, "int", "particles N", low=10)
    tolerance: str = option("adaptive", "choice", "tolerance schedule: adaptive or fixed", choices=("adaptive", "fixed"))
    quantile: float = option(0.5, "float", "quantile of the distances that sets the next tolerance", low=0.0,
                             high=1.0)


def smc_abc(model, options):
    """Engine ``smc-abc``: ``simulations`` = total budget (default 50,000), ``particles`` = N (1,000).  Runs the
    simulator model the observation model holds (``model.latent.state``) and names the draws through the observation
    model."""
    return smc_abc_on_model(model.family, model.latent.state, options, observation=model)


def on_model(model, observed, options):
    """Engine ``smc-abc`` of a user :class:`~dpposterior.Model` (``Model.methods``), on its simulator view."""
    return smc_abc_on_model(model.name, model.simulator_model(observed), options)


def smc_abc_on_model(name: str, model, options, observation=None):
    """SMC-ABC on a simulator model (a family's, or a user Model's view) -> Posterior named ``name``."""
    opts = options
    simulations, particles, tolerance, quantile = opts.simulations, opts.particles, opts.tolerance, opts.quantile
    if simulations < particles:  # before the run is announced (run_smc_abc refuses it too)
        raise InputError("simulations", f"the budget must cover at least one population ({particles})")
    from ..memory import check_fits

    # a batch holds up to 20 populations' proposals, their statistics and distances, with numpy temporaries
    batch = min(simulations, BATCH_POPULATIONS * particles)
    check_fits(3 * 8.0 * batch * (model.dim + model.stat_dim + 1), "particles",
               f"smc-abc: batches of up to {batch:,} simulations of {model.stat_dim} released values",
               "fewer --particles (the population size)")
    common.announce_budget(model, "smc-abc", simulations, options.quiet, trains=False)
    with common.round_progress(1, "SMC-ABC", options.quiet) as advance:
        res = run_smc_abc(model, simulations, particles, tolerance, quantile, opts.seed)
        advance(info=f"{res.simulations} sims, {len(res.generations)} generations, tol {res.tolerance:.3g}")
    rng = np.random.default_rng(np.random.SeedSequence(opts.seed).spawn(2)[1])
    draws = res.resample(opts.draws * opts.chains, rng)
    attrs = {"simulations": res.simulations, "particles": particles, "generations": len(res.generations),
             "final_tolerance": res.tolerance, "tolerance_schedule": tolerance}
    return common.to_posterior(name, "smc-abc", model, draws, opts.chains, attrs,
                               {"population": res.theta, "weights": res.weights, "generations": res.generations},
                               observation=observation)
