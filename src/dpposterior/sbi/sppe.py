"""SPPE: sequential private-data posterior estimation (Xiong, Ju & Zhang, Algorithm 1).

Round r draws theta_i from the proposal p~_{r-1} (the prior, then the current
q_phi(theta | s_dp^o)), simulates the confidential statistic s(x_i) and, per
simulation, M privatised replicates s_dp,ij = tau(u_ij, s(x_i)) from an
independently scrambled Sobol' set u_i1..u_iM (nested RQMC, eq. 11).  All rounds'
simulations are kept (the filtration D_r).

Loss.  Round 1 (proposal = prior): l_PPE (eq. 6), -1/(NM) sum_ij log q(theta_i | s_ij).
Later rounds, ``proposal="atomic"`` (default; the paper's Algorithm 1): theta from
q(theta | s_dp^o) and the APT / SNPE-C atomic loss (eq. 8, Greenberg et al. 2019, and App. D):
q~(theta_i | s_ij) = [q(theta_i|s_ij)/pi(theta_i)] / sum_{k in atoms_i} q(theta_k|s_ij)/pi(theta_k),
the atoms being theta_i and ``num_atoms - 1`` other parameters of the mini-batch.
Options ``rqmc=False`` (i.i.d. uniforms) and ``rqmc_points=1`` give the MC and
"noise drawn once inside the simulator" variants of the Figure 7 ablation.
``proposal="truncated"`` (TSNPE, Deistler et al. 2022; not the default: docs/benchmarks.md,
"Options measured and left off by default"): theta from the prior truncated to the 1 - 1e-4 highest-probability region of
q(theta | s_dp^o), and l_PPE on all rounds' simulations (valid because every proposal is the prior
restricted to a region holding the posterior; no atoms, about 10x cheaper per step).
``combined_loss=True`` (off by default; not in the paper) adds, in the atomic rounds,
the plain l_PPE term on the round-1 simulations, which were drawn from the prior
(sbi's ``use_combined_loss``): the atomic loss only fixes ratios of q between
atoms, so mass far from every atom is unconstrained and the tails of q can drift
over rounds; the prior-sample term is meant to pin them (in one run on linreg-ju at
eps = 1 it did not help: docs/benchmarks.md, "Options measured and left off by default").

Posterior.  ``correction="none"`` (the paper; run_sppe's default): draws from the last round's flow.
``"importance"`` / ``"auto"`` (the engine's default is "auto"): the importance sample of all
rounds' simulations, weighted with the mechanism's density eta(s_dp^o | s_i) over the mixture of the
rounds' proposal densities (:mod:`dpposterior.sbi.importance`); the flows only propose, so the last
round is not trained.  "auto" falls back to the flow when the effective sample size is below
2 (d + 1) (:func:`~dpposterior.sbi.importance.min_ess`); a PSIS k-hat above min(1 - 1/log10 S, 0.7)
only adds a warning.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from ..options import option
from .importance import importance_posterior
from .flows import FlowConfig, StandardizedFlow, configure_torch, resolve_device, robust_scale
from .losses import atom_indices, atomic_loss, npe_loss  # noqa: F401  (re-exported)
from .rounds import RoundLoop, SBIResult, check_round_memory  # noqa: F401  (SBIResult re-exported)
from . import common

#: the ``training`` preset of the engine (``dpposterior infer --method sppe``) with its default ``correction``
#: ("auto"; :data:`TRAINING_FOR_CORRECTION`); run_sppe(config=None) is "paper"
DEFAULT_TRAINING = "fast"


def truncated_prior_sample(model, log_q, n: int, rng: np.random.Generator, threshold: float,
                           max_draws: int = 2_000_000) -> tuple[np.ndarray, float]:
    """n prior draws with log q(theta | s_dp^o) >= threshold (rejection from the prior, TSNPE).

    Returns (theta, acceptance rate).  If fewer than n are accepted within ``max_draws`` prior
    draws, the accepted ones are repeated (resampled) to fill n, which keeps the proposal inside
    the truncated region (the acceptance rate is reported so a caller can see it happened).
    """
    kept, seen, accepted = [], 0, 0
    chunk = max(4 * n, 4096)
    while accepted < n and seen < max_draws:
        cand = model.prior.sample(chunk, rng)
        ok = log_q(cand) >= threshold
        kept.append(cand[ok])
        accepted += int(ok.sum())
        seen += chunk
        rate = accepted / seen
        if accepted < n and rate > 0:
            chunk = int(min(max_draws - seen, max(4096, 1.2 * (n - accepted) / rate)))
            chunk = max(chunk, 1)
    theta = np.concatenate(kept) if kept else np.empty((0, model.dim))
    rate = accepted / max(seen, 1)
    if len(theta) >= n:
        return theta[:n], rate
    if len(theta) == 0:
        raise RuntimeError("truncated proposal: no prior draw inside the posterior's HPR")
    return theta[rng.integers(len(theta), size=n)], rate


def run_sppe(model, simulations: int = 1000, rounds: int = 10, rqmc_points: int = 8, rqmc: bool = True,
             draws: int = 5000, seed: int = 0, num_atoms: int = 10, config: FlowConfig | None = None,
             quiet: bool = True, round_callback=None, description: str = "SPPE",
             combined_loss: bool = False, proposal: str = "atomic", truncation_quantile: float = 1e-4,
             device: str = "cpu", correction: str = "none") -> SBIResult:
    """Algorithm 1.  ``round_callback(r, sample_fn, info)`` is called after each round.

    ``proposal``: "truncated" (TSNPE, Deistler et al. 2022): rounds r >= 2 propose
    from the prior truncated to the highest-probability region of the current q (the set
    log q(theta | s_dp^o) >= the ``truncation_quantile`` quantile of log q over q's own draws),
    so every simulation is a prior draw restricted to a region holding the posterior and
    the plain l_PPE (eq. 6) on all rounds' simulations stays a valid loss; no atoms, no
    drifting tails.  "atomic" (default): the paper's Algorithm 1, proposals from q and the APT loss (eq. 8).
    ``device``: "cpu", "cuda" or "auto"; the flow is trained and sampled there.
    ``correction``: "none" (the paper: draws from the last round's flow); "importance": the draws
    are the importance-sampling posterior of all rounds' simulations weighted with the mechanism's
    density (:mod:`dpposterior.sbi.importance`), so the last round's simulations are not used to
    refit the flow (``result.flow`` is round R - 1's, None after one round); a RuntimeWarning says
    when its PSIS k-hat exceeds min(1 - 1/log10 S, 0.7) for S simulations (a large Monte Carlo error);
    "auto" (the engine's default): the importance posterior (with that warning) unless its effective sample
    size is below min_ess(d) = 2 (d + 1); then (with a RuntimeWarning) the last round's flow is fitted and its
    draws returned, exactly as with "none".
    """
    if proposal not in ("truncated", "atomic"):
        raise ValueError(f"proposal must be 'truncated' or 'atomic' (got {proposal!r})")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS} (got {correction!r})")
    config = config or FlowConfig()
    dev = resolve_device(device)
    configure_torch(seed)
    ss = np.random.SeedSequence(seed)
    rng_sim, rng_split = (np.random.default_rng(s) for s in ss.spawn(2))
    gen_seed, validation_seed = (int(v) for v in ss.generate_state(2))
    gen = torch.Generator(device=dev).manual_seed(gen_seed)
    observed = torch.as_tensor(model.observed, dtype=torch.float32, device=dev)

    loop = RoundLoop(model, simulations, rqmc_points, rqmc, rng_sim, rng_split, config, gen, with_log_prior=True)
    state = {"threshold": None, "acceptance": None}
    #: log densities of rounds 2..R's proposals (with a correction), frozen when each round proposes
    proposal_log_densities = []

    def sample_posterior(n: int) -> np.ndarray:
        return loop.flow.sample(observed, n).double().cpu().numpy()

    def log_q_of(flow):
        """theta (n, d) -> log flow(theta | s_dp^o), in chunks."""
        @torch.no_grad()
        def log_density(theta: np.ndarray) -> np.ndarray:
            out = []
            for start in range(0, len(theta), 65536):
                t = torch.as_tensor(theta[start:start + 65536], dtype=torch.float32, device=dev)
                out.append(flow.log_prob(t, observed.expand(len(t), -1)).double().cpu().numpy())
            return np.concatenate(out) if out else np.empty(0)
        return log_density

    def log_q(theta: np.ndarray) -> np.ndarray:
        return log_q_of(loop.flow)(theta)

    def propose(n: int) -> np.ndarray:
        if proposal == "atomic":
            if correction != "none":   # the proposal's density, frozen before later rounds refit the flow
                proposal_log_densities.append(log_q_of(copy.deepcopy(loop.flow).eval()))
            return sample_posterior(n)
        # HPR threshold from q's own draws (sbi's TSNPE: 1e-4 quantile of log q over 10^4 draws)
        ref = sample_posterior(max(10_000, n))
        state["threshold"] = float(np.quantile(log_q(ref), truncation_quantile))
        theta, state["acceptance"] = truncated_prior_sample(model, log_q, n, rng_sim, state["threshold"])
        if correction != "none":   # the prior restricted to {log q >= threshold}, renormalised
            inside, threshold = log_q_of(copy.deepcopy(loop.flow).eval()), state["threshold"]
            log_acceptance = np.log(max(state["acceptance"], 1e-300))
            proposal_log_densities.append(lambda th: np.where(inside(th) >= threshold, model.prior.log_prob(th)
                                                              - log_acceptance, -np.inf))
        return theta

    def make_flow(theta, sdp):
        t_mean, t_std = robust_scale(theta)
        c_mean, c_std = robust_scale(sdp.reshape(-1, sdp.shape[-1]))
        return StandardizedFlow(model.dim, model.stat_dim, t_mean, t_std, c_mean, c_std, config)

    def round_loss(r):
        flow = loop.flow
        if r == 1 or proposal == "truncated":
            return lambda idx: npe_loss(flow.log_prob, loop.theta[idx], loop.replicates(idx))
        from_prior = torch.arange(len(loop.theta), device=dev) < loop.first_round  # round 1 proposes from the prior

        def batch_loss(idx):
            # validation: the same atoms every epoch (common random numbers), so early stopping
            # sees the flow improve, not the atoms change
            g = gen if flow.training else torch.Generator(device=dev).manual_seed(validation_seed + int(idx[0]))
            sdp_batch = loop.replicates(idx)
            loss = atomic_loss(flow.log_prob, loop.theta[idx], loop.log_prior[idx], sdp_batch, num_atoms, g)
            if combined_loss:
                prior_rows = from_prior[idx]
                if prior_rows.any():
                    share = prior_rows.float().mean()
                    loss = loss + share * npe_loss(flow.log_prob, loop.theta[idx][prior_rows], sdp_batch[prior_rows])
            return loss
        return batch_loss

    def after_train(r):
        if r > 1 and proposal == "truncated":
            return {"acceptance": state["acceptance"]}
        return None

    loop.run(rounds, propose, make_flow, round_loss, description=description, quiet=quiet,
             round_callback=round_callback, sample_posterior=sample_posterior, after_train=after_train,
             train_last=correction == "none")
    imp, applied = None, False
    if correction != "none":
        imp = importance_correction(model, loop.data(), proposal_log_densities, draws,
                                    np.random.default_rng(ss.spawn(1)[0]))
        applied = correction == "importance" or imp.usable
        if applied and not imp.reliable:
            warnings.warn(f"SPPE importance correction: PSIS k-hat {imp.khat:.2f} > {imp.khat_threshold:.2f} (effective "
                          f"sample size {imp.ess:.0f} of {len(loop.theta)} simulations): the posterior has a large "
                          "Monte Carlo error; more rounds (or simulations per round) reduce it",
                          RuntimeWarning, stacklevel=2)
        elif not applied:   # "auto" with too few effective simulations: the paper's posterior, the last flow
            warnings.warn(f"SPPE importance correction not applied: effective sample size {imp.ess:.1f} < "
                          f"{imp.min_ess:.0f} of {len(loop.theta)} simulations (PSIS k-hat {imp.khat:.2f}); the draws "
                          "are the last round's flow's (correction='importance' keeps the weighted estimate)",
                          RuntimeWarning, stacklevel=2)
            loop.train_round(rounds, round_loss, after_train)
    draws_theta = imp.theta if applied else sample_posterior(draws)
    trained = any(info["trained"] for info in loop.rounds)   # one round with the correction: no flow
    return SBIResult(theta=draws_theta, flow=loop.flow if trained else None, rounds=loop.rounds,
                     sampler=sample_posterior if trained else None, data=loop.data(), importance=imp,
                     importance_applied=applied)


#: values of run_sppe's (and the engine's) ``correction`` option
CORRECTIONS = ("auto", "importance", "none")
#: the engine's ``correction`` (``dpposterior infer --method sppe --correction``); run_sppe's default is "none"
DEFAULT_CORRECTION = "auto"
#: the engine's default ``training`` preset per ``correction``: with the correction the flows only propose
#: (and "fast" costs about half of "paper"); without it the flow is the posterior (the paper's preset)
TRAINING_FOR_CORRECTION = {"auto": "fast", "importance": "fast", "none": "paper"}


def importance_correction(model, data: dict, proposal_log_densities: list, draws: int, rng):
    """:func:`~dpposterior.sbi.importance.importance_posterior` of an SPPE run's pooled simulations.

    ``data``: :meth:`RoundLoop.data` (theta, statistics, round); ``proposal_log_densities``: the log
    densities of rounds 2..R's proposals (round 1's is the prior).
    """
    theta, rounds = data["theta"], data["round"]
    log_prior = model.prior.log_prob(theta)
    observed = np.asarray(model.observed, float)[None, :]
    log_likelihood = np.asarray(model.mechanism.logpdf(observed, data["statistics"]), float).sum(axis=-1)
    log_proposals = np.stack([log_prior] + [g(theta) for g in proposal_log_densities])
    counts = np.bincount(rounds)[1:]
    return importance_posterior(theta, log_prior, log_likelihood, log_proposals, counts, draws, rng)


#: SPPE's training presets (option ``training``).  "paper": App. E of Xiong, Ju & Zhang as
#: :class:`FlowConfig` holds it (8 transforms, batch 100, one RQMC replicate per simulation per step,
#: 5% validation, patience 20, <= 200 epochs).  "fast" (docs/benchmarks.md, "SPPE vs sbi NPE-C on
#: linreg-ju"): 5 transforms; round 1 uses all M replicates of a simulation in each step (batch 100);
#: the atomic rounds batch 200 with <= 40 epochs and 5 atoms; 10% validation, patience 10.
TRAINING = {
    "paper": {},
    "fast": dict(transforms=5, validation_fraction=0.1, patience=10, batch_size=200, max_epochs=40,
                 first_round=dict(replicates_per_step=None, batch_size=100, max_epochs=200)),
}
#: the engine's ``num_atoms`` default per preset
TRAINING_ATOMS = {"paper": 10, "fast": 5}


def training_config(training: str = DEFAULT_TRAINING, batch_size: int | None = None, max_epochs: int | None = None) -> FlowConfig:
    """The :class:`FlowConfig` of a ``training`` preset; ``batch_size`` / ``max_epochs`` given set every round's."""
    fields = dict(TRAINING[training])
    first = dict(fields.pop("first_round", None) or {})
    for key, value in (("batch_size", batch_size), ("max_epochs", max_epochs)):
        if value is not None:
            fields[key] = value
            first.pop(key, None)
    return FlowConfig(**fields, first_round=first or None)


@dataclass(frozen=True)
class SppeOptions(common.RQMCOptions):
    """Options of engine ``sppe`` (families and user Models): draws, chains, seed; ``simulations``, ``rounds``,
    ``rqmc_points``, ``rqmc``, ``device`` (:class:`~dpposterior.sbi.common.RQMCOptions`); the training
    (``training`` preset, ``max_epochs``, ``batch_size``, ``num_atoms``, ``combined_loss``), the ``proposal``
    and the final ``correction`` (docs/sbi.md).  An unset preset option follows ``correction``/``training``."""

    engine: ClassVar[str] = "sppe"

    correction: str = option(DEFAULT_CORRECTION, "choice", "final posterior: auto, importance or none",
                             choices=CORRECTIONS)
    training: str | None = option(None, "choice", "training preset: paper or fast (unset: fast with a correction, "
                                  "paper with none)", choices=tuple(TRAINING), nullable=True)
    num_atoms: int | None = option(None, "int", "atoms of the atomic loss (unset: the preset's)", low=2,
                                   nullable=True)
    max_epochs: int | None = option(None, "int", "most training epochs per round (unset: the preset's)", low=1,
                                    nullable=True)
    batch_size: int | None = option(None, "int", "training batch size (unset: the preset's)", low=2, nullable=True)
    combined_loss: bool = option(False, "bool", "add the first round's NPE loss in later rounds")
    proposal: str = option("atomic", "choice", "later rounds' proposal: atomic (APT) or truncated (TSNPE)",
                           choices=("atomic", "truncated"))


def sppe(model, options) -> "Posterior":  # noqa: F821
    """Engine ``sppe``: Algorithm 1 with the paper's defaults (N = 1000 per round, R = 10),
    atomic (APT) rounds unless ``proposal="truncated"`` (TSNPE).  Runs the simulator model the observation model
    holds (``model.latent.state``) and names the draws through the observation model."""
    return sppe_on_model(model.family, model.latent.state, options, observation=model)


def on_model(model, observed, options):
    """Engine ``sppe`` of a user :class:`~dpposterior.Model` (``Model.methods``), on its simulator view."""
    return sppe_on_model(model.name, model.simulator_model(observed), options)


def sppe_on_model(name: str, model, options, observation=None) -> "Posterior":  # noqa: F821
    """SPPE on a simulator model (a family's, or a user Model's view) -> Posterior named ``name``."""
    quiet = options.quiet
    simulations, rounds, m, rqmc = options.simulations, options.rounds, options.rqmc_points, options.rqmc
    correction = options.correction
    # the training preset follows the correction, and the atoms follow the preset, unless given
    training = options.training or TRAINING_FOR_CORRECTION[correction]
    num_atoms = options.num_atoms or TRAINING_ATOMS[training]
    combined, proposal = options.combined_loss, options.proposal
    device = options.resolved_device()
    config = training_config(training, max_epochs=options.max_epochs, batch_size=options.batch_size)
    total = options.draws * options.chains
    check_round_memory(model, simulations, rounds, m, "sppe")
    common.announce_budget(model, "sppe", simulations * rounds, quiet)
    res = run_sppe(model, simulations, rounds, m, rqmc, total, options.seed, num_atoms, config, quiet,
                   combined_loss=combined, proposal=proposal, device=device, correction=correction)
    attrs = {"simulations_per_round": simulations, "rounds": rounds, "rqmc_points": m, "rqmc": int(rqmc),
             "total_simulations": simulations * rounds, "combined_loss": int(combined), "proposal": proposal,
             "batch_size": config.batch_size, "device": device, "training": training, "num_atoms": num_atoms,
             "correction": correction}
    if res.importance is not None:
        attrs.update(importance_ess=res.importance.ess, importance_khat=res.importance.khat,
                     importance_khat_threshold=res.importance.khat_threshold,
                     importance_min_ess=res.importance.min_ess,
                     importance_applied=int(res.importance_applied))
    return common.to_posterior(name, "sppe", model, res.theta, options.chains, attrs,
                               {"flow": res.flow, "rounds": res.rounds}, observation=observation)
