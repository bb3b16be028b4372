"""SPLE: sequential private-data likelihood estimation (Xiong, Ju & Zhang, Algorithm 2).

A conditional flow q_phi(s_dp | theta) is trained with the nested RQMC estimate
of l_PLE (eq. 5 with eq. 11): -1/(NM) sum_ij log q(tau(u_ij, s(x_i)) | theta_i), on
all rounds' simulations (eq. 14: valid under any proposal, no correction).  The
next proposal is prop. to pi(theta) q(s_dp^o | theta), sampled by vectorised slice
sampling (:mod:`dpposterior.sbi.slice`).  Returns posterior draws and the
likelihood estimator ``log_likelihood(theta, s_dp=observed)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from scipy import special

from ..options import option
from .flows import FlowConfig, StandardizedFlow, configure_torch, resolve_device, robust_scale
from .losses import ple_loss
from .rounds import RoundLoop, SBIResult, check_round_memory
from .slice import slice_sample
from . import common


def run_sple(model, simulations: int = 1000, rounds: int = 10, rqmc_points: int = 8, rqmc: bool = True,
             draws: int = 5000, seed: int = 0, config: FlowConfig | None = None, quiet: bool = True,
             round_callback=None, chains: int = 50, warmup: int = 30, device: str = "cpu") -> SBIResult:
    """Algorithm 2.  ``round_callback(r, sample_fn, info)`` after each round; ``device`` cpu, cuda or auto."""
    config = config or FlowConfig()
    dev = resolve_device(device)
    configure_torch(seed)
    ss = np.random.SeedSequence(seed)
    rng_sim, rng_split, rng_mcmc = (np.random.default_rng(s) for s in ss.spawn(3))
    gen = torch.Generator(device=dev).manual_seed(int(ss.generate_state(1)[0]))
    observed = torch.as_tensor(model.observed, dtype=torch.float32, device=dev)
    loop = RoundLoop(model, simulations, rqmc_points, rqmc, rng_sim, rng_split, config, gen)
    state = {"x": None}

    @torch.no_grad()
    def log_likelihood(theta, sdp=None) -> np.ndarray:
        theta = torch.as_tensor(np.asarray(theta, float).reshape(-1, model.dim), dtype=torch.float32, device=dev)
        y = observed if sdp is None else torch.as_tensor(np.asarray(sdp, float), dtype=torch.float32, device=dev)
        y = y.expand(len(theta), model.stat_dim)
        return loop.flow.log_prob(y, theta).double().cpu().numpy()

    def log_post(theta):
        return model.prior.log_prob(theta) + log_likelihood(theta)

    def sample_posterior(n: int) -> np.ndarray:
        # initialise the chains by sampling-importance-resampling from the prior (as sbi does)
        if state["x"] is None:
            cand = model.prior.sample(max(20 * chains, 1000), rng_mcmc)
            lw = log_likelihood(cand)
            p = np.exp(lw - special.logsumexp(lw))
            state["x"] = cand[rng_mcmc.choice(len(cand), chains, p=p)]
        per_chain = int(np.ceil(n / chains))
        out = slice_sample(log_post, state["x"], per_chain, rng_mcmc, warmup=warmup, thin=1)
        state["x"] = out[-1]
        # interleave chains so any prefix mixes all chains
        return out.reshape(-1, model.dim)[:n]

    def make_flow(theta, sdp):
        c_mean, c_std = robust_scale(theta)
        y_mean, y_std = robust_scale(sdp.reshape(-1, sdp.shape[-1]))
        return StandardizedFlow(model.stat_dim, model.dim, y_mean, y_std, c_mean, c_std, config)

    def round_loss(r):
        return lambda idx: ple_loss(loop.flow.log_prob, loop.theta[idx], loop.replicates(idx))

    def after_train(r):
        state["x"] = None  # the target changed: re-initialise the chains

    loop.run(rounds, sample_posterior, make_flow, round_loss, description="SPLE", quiet=quiet,
             round_callback=round_callback, sample_posterior=sample_posterior, after_train=after_train)
    draws_theta = sample_posterior(draws)
    return SBIResult(theta=draws_theta, flow=loop.flow, rounds=loop.rounds, sampler=sample_posterior,
                     log_likelihood=log_likelihood, data=loop.data())


@dataclass(frozen=True)
class SpleOptions(common.RQMCOptions):
    """Options of engine ``sple`` (families and user Models): draws, chains, seed; ``simulations``, ``rounds``,
    ``rqmc_points``, ``rqmc``, ``device`` (:class:`~dpposterior.sbi.common.RQMCOptions`); ``max_epochs``."""

    engine: ClassVar[str] = "sple"

    max_epochs: int = option(FlowConfig.max_epochs, "int", "most training epochs per round", low=1)


def sple(model, options):
    """Engine ``sple``: Algorithm 2 with the paper's defaults (N = 1000 per round, R = 10).  Runs the simulator model
    the observation model holds (``model.latent.state``) and names the draws through the observation model."""
    return sple_on_model(model.family, model.latent.state, options, observation=model)


def on_model(model, observed, options):
    """Engine ``sple`` of a user :class:`~dpposterior.Model` (``Model.methods``), on its simulator view."""
    return sple_on_model(model.name, model.simulator_model(observed), options)


def sple_on_model(name: str, model, options, observation=None):
    """SPLE on a simulator model (a family's, or a user Model's view) -> Posterior named ``name``."""
    quiet = options.quiet
    simulations, rounds, m, rqmc = options.simulations, options.rounds, options.rqmc_points, options.rqmc
    config = FlowConfig(max_epochs=options.max_epochs)
    total = options.draws * options.chains
    device = options.resolved_device()
    check_round_memory(model, simulations, rounds, m, "sple")
    common.announce_budget(model, "sple", simulations * rounds, quiet)
    res = run_sple(model, simulations, rounds, m, rqmc, total, options.seed, config, quiet, device=device)
    attrs = {"simulations_per_round": simulations, "rounds": rounds, "rqmc_points": m, "rqmc": int(rqmc),
             "total_simulations": simulations * rounds, "sampler": "slice (50 vectorised chains)", "device": device}
    return common.to_posterior(name, "sple", model, res.theta, options.chains, attrs,
                               {"flow": res.flow, "rounds": res.rounds, "log_likelihood": res.log_likelihood},
                               observation=observation)
