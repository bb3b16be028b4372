"""Simulation-based calibration (SBC) of the simulation-based engines.

Talts, Betancourt, Simpson, Vehtari & Gelman (2018), "Validating Bayesian inference
algorithms with simulation-based calibration": if theta* ~ pi, s_dp* ~ p(. | theta*)
and theta_1..theta_S ~ q(. | s_dp*), then for the exact posterior q the rank of theta*
among the draws is uniform.  Ranks are the randomised posterior quantiles U of
:func:`dpposterior.diagnostics.calibration.randomized_ranks` and are summarised by
:func:`~dpposterior.diagnostics.calibration.summarise_ranks` (KS against U(0, 1) and
coverage of the central 50/90/95% intervals) -- the rank code of ``dpposterior calibrate``.

Amortised SBC (Xiong, Ju & Zhang, Algorithm 1, round 1).  With the prior as proposal,
SPPE's first round minimises the nested estimate (eq. 6 with eq. 11) of
E_{pi(theta) p(s_dp | theta)}[-log q(theta | s_dp)], so the trained flow is an amortised
posterior q(theta | s_dp) for *every* release.  One trained flow therefore gives the
posterior of any number L of simulated datasets: train once, draw
(theta*_l, s_dp*_l) from prior x simulator x mechanism, condition the flow on each
s_dp*_l (one batched call), rank theta*_l.  Given the trained flow the L ranks are
i.i.d., so the SBC tests the calibration of *that* estimator with exactly binomial
Monte Carlo error (see :func:`coverage_tolerance`).

The method that must fail is the noise-ignoring NPE (``naive``,
:mod:`dpposterior.sbi.naive`): the same flow trained on the confidential s
(``model.without_noise()``) and conditioned on the same noisy s_dp*.

SMC-ABC is not amortised: :func:`smc_abc_sbc` reruns it on each of L datasets
(a small budget per dataset); its noise-ignoring counterpart runs the same SMC-ABC
with a noise-free simulator against the noisy release.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import stats

from .ranks import COVERAGE_LEVELS, randomized_ranks, summarise_ranks
from ..sbi.flows import FlowConfig

#: method names of the amortised study
SPPE_ROUND1 = "sppe-round1"
NAIVE = "naive"


@dataclass
class SBCResult:
    """Ranks of one method on L datasets and their summaries per parameter."""

    method: str
    ranks: np.ndarray                     # (L, d) randomised posterior quantiles of theta*
    parameter_names: list[str]
    summary: dict                         # parameter -> {"ks", "ks_pvalue", "coverage": {level: cov}}
    seconds: float = math.nan             # training (amortised) or all runs (SMC-ABC)
    info: dict = field(default_factory=dict)

    def coverage(self, level: float, parameter: int | str = 0) -> float:
        name = parameter if isinstance(parameter, str) else self.parameter_names[parameter]
        return self.summary[name]["coverage"][str(level)]


def coverage_tolerance(level: float, datasets: int, z: float) -> float:
    """Half-width z * sqrt(c (1 - c) / L) of the Monte Carlo band of an empirical coverage.

    Under calibration the number of datasets whose theta* falls in the central c-interval
    is Binomial(L, c) (the L ranks are i.i.d. Uniform(0, 1)), so the empirical coverage has
    mean c and standard deviation sqrt(c (1 - c) / L); for L >= 100 the normal approximation
    is adequate for z <= 4.
    """
    return z * math.sqrt(level * (1.0 - level) / datasets)


def familywise_z(tests: int, alpha: float = 1e-3) -> float:
    """Two-sided normal quantile with a Bonferroni split of ``alpha`` over ``tests`` checks."""
    return float(stats.norm.isf(alpha / (2.0 * tests)))


def sbc_checks(result: SBCResult, alpha: float = 1e-3, lower_only: bool = False) -> dict[str, bool]:
    """Pass (True) / fail of every check of the calibration test; family-wise false-alarm rate <= alpha.

    Per parameter: the KS test of the ranks against Uniform(0, 1) (p-value > alpha / k) and, for
    every c in COVERAGE_LEVELS, |coverage - c| <= coverage_tolerance(c, L, z) with
    z = familywise_z(k, alpha); k = number of checks over all parameters (Bonferroni: by the
    union bound a calibrated estimator fails any check with probability <= alpha).
    ``lower_only`` (for methods that are conservative by design, e.g. ABC whose tolerance widens
    the posterior): only coverage >= c - tolerance, one-sided z = Phi^-1(1 - alpha / k), no KS.
    """
    L = len(result.ranks)
    per_param = len(COVERAGE_LEVELS) + (0 if lower_only else 1)
    k = per_param * len(result.parameter_names)
    z = float(stats.norm.isf(alpha / k)) if lower_only else familywise_z(k, alpha)
    out = {}
    for name in result.parameter_names:
        s = result.summary[name]
        if not lower_only:
            out[f"{name}:ks"] = s["ks_pvalue"] > alpha / k
        for c in COVERAGE_LEVELS:
            cov, tol = s["coverage"][str(c)], coverage_tolerance(c, L, z)
            out[f"{name}:cov{c:g}"] = cov >= c - tol if lower_only else abs(cov - c) <= tol
    return out


def prior_predictive(model, datasets: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(theta* (L, d), s_dp* (L, r)): prior, simulator and the *true* privacy mechanism."""
    theta = model.prior.sample(datasets, rng)
    s = model.statistics(theta, rng)
    return theta, model.privatize(s, rng)


def flow_draws(flow, contexts: np.ndarray, draws: int, chunk: int = 250) -> np.ndarray:
    """(L, S, d) draws of q(theta | s_dp*_l), all contexts of a chunk in one batched call."""
    out = []
    for start in range(0, len(contexts), chunk):
        ctx = torch.as_tensor(contexts[start:start + chunk], dtype=torch.float32)
        out.append(flow.sample(ctx, draws).double().numpy().transpose(1, 0, 2))   # (S, c, d) -> (c, S, d)
    return np.concatenate(out)


def rank_result(method: str, truth: np.ndarray, draws: np.ndarray, names: list[str], rng, seconds=math.nan,
                info: dict | None = None) -> SBCResult:
    ranks = randomized_ranks(truth, draws, rng)
    summary = {name: summarise_ranks(ranks[:, j]) for j, name in enumerate(names)}
    return SBCResult(method, ranks, list(names), summary, seconds, dict(info or {}))


def amortized_sbc(model, datasets: int = 1000, draws: int = 500, simulations: int = 2000, rqmc_points: int = 8,
                  rqmc: bool = True, seed: int = 0, config: FlowConfig | None = None,
                  methods=(SPPE_ROUND1, NAIVE)) -> dict[str, SBCResult]:
    """SBC of SPPE's round-1 (amortised) flow and of the noise-ignoring flow on the same L datasets.

    ``simulations`` training simulations from the prior (SPPE: ``rqmc_points`` RQMC
    replicates of s_dp each; naive: the noise-free s), ``datasets`` = L SBC datasets,
    ``draws`` = S posterior draws per dataset.
    """
    from ..sbi.naive import run_naive_npe
    from ..sbi.sppe import run_sppe

    ss = np.random.SeedSequence(seed)
    data_ss, rank_ss, train_ss = ss.spawn(3)
    truth, sdp = prior_predictive(model, datasets, np.random.default_rng(data_ss))
    rank_rng = np.random.default_rng(rank_ss)
    train_seeds = {m: int(s) for m, s in zip(methods, train_ss.generate_state(len(methods), dtype=np.uint32))}
    out = {}
    for method in methods:
        t0 = time.perf_counter()
        if method == SPPE_ROUND1:
            res = run_sppe(model, simulations, rounds=1, rqmc_points=rqmc_points, rqmc=rqmc, draws=1,
                           seed=train_seeds[method], config=config)
        elif method == NAIVE:
            res = run_naive_npe(model, simulations, rounds=1, draws=1, seed=train_seeds[method], config=config)
        else:
            raise ValueError(f"unknown SBC method {method!r}")
        seconds = time.perf_counter() - t0
        post = flow_draws(res.flow, sdp, draws)
        out[method] = rank_result(method, truth, post, model.parameter_names, rank_rng, seconds,
                                  {"epochs": res.rounds[0]["epochs"], "simulations": simulations,
                                   "datasets": datasets, "draws": draws, "posterior_sd": post.std(axis=1),
                                   "releases": sdp})
    return out


def smc_abc_sbc(model, datasets: int = 150, draws: int = 400, simulations: int = 4000, particles: int = 200,
                quantile: float = 0.5, seed: int = 0, naive: bool = True) -> dict[str, SBCResult]:
    """SBC of SMC-ABC (one run per dataset) and, with ``naive``, of noise-ignoring SMC-ABC."""
    from ..sbi.smc_abc import run_smc_abc

    ss = np.random.SeedSequence(seed)
    data_ss, rank_ss, run_ss = ss.spawn(3)
    truth, sdp = prior_predictive(model, datasets, np.random.default_rng(data_ss))
    rank_rng = np.random.default_rng(rank_ss)
    variants = {"smc-abc": model}
    if naive:
        variants["naive-abc"] = model.without_noise()
    out = {}
    for (method, base), method_ss in zip(variants.items(), run_ss.spawn(len(variants))):
        seeds = method_ss.generate_state(datasets, dtype=np.uint32)
        resample_rng = np.random.default_rng(method_ss.spawn(1)[0])
        post, tolerances, sds = [], [], []
        t0 = time.perf_counter()
        for obs, s in zip(sdp, seeds):
            res = run_smc_abc(dataclasses.replace(base, observed=obs), simulations, particles, "adaptive",
                              quantile, seed=int(s))
            post.append(res.resample(draws, resample_rng))
            tolerances.append(res.tolerance)
            mean = res.weights @ res.theta
            sds.append(np.sqrt(res.weights @ (res.theta - mean) ** 2))   # weighted population sd
        seconds = time.perf_counter() - t0
        out[method] = rank_result(method, truth, np.stack(post), model.parameter_names, rank_rng, seconds,
                                  {"final_tolerance": np.asarray(tolerances), "datasets": datasets,
                                   "simulations": simulations, "particles": particles,
                                   "posterior_sd": np.asarray(sds)})
    return out


def format_table(results: dict[str, SBCResult], title: str = "") -> str:
    """Markdown table: method, parameter, KS, p-value, coverage at 0.5/0.9/0.95."""
    lines = [f"#### {title}", ""] if title else []
    head = "| method | parameter | KS | KS p-value | " + " | ".join(f"cov {c:g}" for c in COVERAGE_LEVELS) + " |"
    lines += [head, "|" + "---|" * (4 + len(COVERAGE_LEVELS))]
    for method, r in results.items():
        for name in r.parameter_names:
            s = r.summary[name]
            cov = " | ".join(f"{s['coverage'][str(c)]:.3f}" for c in COVERAGE_LEVELS)
            lines.append(f"| {method} | {name} | {s['ks']:.3f} | {s['ks_pvalue']:.3g} | {cov} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the study's problems
def gaussian_laplace_model(conf_sd: float = 0.5, laplace_scale: float = 1.0):
    """Toy problem of the amortised SBC: theta ~ N(0, 1), s | theta ~ N(theta, conf_sd^2)
    (the mean of 1/conf_sd^2 unit-variance records), s_dp = s + Laplace(laplace_scale).

    Defaults: the no-noise posterior sd is (1 + 1/0.25)^-1/2 = 0.447 while the Laplace noise
    sd is sqrt(2) = 1.41, three times larger -- the noise dominates, so ignoring it must fail.
    """
    from ..mechanisms import Laplace
    from ..sbi.model import GaussianPrior, SimulatorModel

    def simulate(theta, rng):
        return theta + rng.normal(0.0, conf_sd, size=theta.shape)

    return SimulatorModel(prior=GaussianPrior([0.0], [[1.0]]), simulate=simulate,
                          mechanism=Laplace(epsilon=1.0, sensitivity=laplace_scale), observed=[0.0],
                          parameter_names=["mu"], name="gaussian-laplace")


def gaussian_laplace_posterior_moments(sdp, conf_sd: float = 0.5,
                                       laplace_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Exact posterior mean and sd of theta for :func:`gaussian_laplace_model` releases ``sdp`` (L,), by
    quadrature.

    s_dp - theta = N(0, conf_sd^2) + Laplace(b) has the normal-Laplace density (Reed 2006)
    f(d) = (1/2b) exp(sigma^2 / 2b^2) [e^{-d/b} Phi(d/sigma - sigma/b) + e^{d/b} Phi(-d/sigma - sigma/b)];
    times the N(0, 1) prior on a grid of 1,201 points over [-6, 6] (prior mass outside < 2e-9).
    """
    grid = np.linspace(-6.0, 6.0, 1201)
    d = np.asarray(sdp, float).reshape(-1)[:, None] - grid[None, :]
    a = conf_sd / laplace_scale
    loglik = np.logaddexp(-d / laplace_scale + stats.norm.logcdf(d / conf_sd - a),
                          d / laplace_scale + stats.norm.logcdf(-d / conf_sd - a))
    logp = loglik + stats.norm.logpdf(grid)[None, :]
    p = np.exp(logp - logp.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    mean = p @ grid
    return mean, np.sqrt(np.maximum(p @ grid ** 2 - mean ** 2, 0.0))


def gaussian_laplace_posterior_sd(sdp, conf_sd: float = 0.5, laplace_scale: float = 1.0) -> np.ndarray:
    """Exact posterior sd of theta (:func:`gaussian_laplace_posterior_moments`)."""
    return gaussian_laplace_posterior_moments(sdp, conf_sd, laplace_scale)[1]


def conjugate_gaussian_model(conf_sd: float = 0.2, noise_sd: float = 0.5):
    """Toy problem of the SMC-ABC SBC: theta ~ N(0, 1), s | theta ~ N(theta, conf_sd^2),
    s_dp = s + N(0, noise_sd^2) (Gaussian mechanism).  Exact posterior:
    N(s_dp / (1 + v), v / (1 + v)) with v = conf_sd^2 + noise_sd^2 (defaults: sd 0.474 vs
    0.196 for the noise-ignoring posterior)."""
    from ..mechanisms import Gaussian
    from ..sbi.model import GaussianPrior, SimulatorModel

    def simulate(theta, rng):
        return theta + rng.normal(0.0, conf_sd, size=theta.shape)

    return SimulatorModel(prior=GaussianPrior([0.0], [[1.0]]), simulate=simulate, mechanism=Gaussian(noise_sd),
                          observed=[0.0], parameter_names=["mu"], name="conjugate-gaussian")


def release_model(release):
    """The SimulatorModel of a family release (path or dict), with the family's default prior."""
    from ..families import get_family
    from ..release import load_release

    release = load_release(release)
    family = get_family(release.family)
    return family.hooks["sbi_model"](release, family.parse_prior(None, release))
