"""The round skeleton shared by SPPE (Algorithm 1) and SPLE (Algorithm 2), and their result type.

Each round r: propose N parameters (round 1 from the prior, later rounds from the engine's current
posterior estimate), simulate the confidential statistic and M privatised replicates per simulation
(nested RQMC, eq. 11), hold out a validation share of the new simulations, append everything to the
filtration D_r, build the flow on the first round (z-scored with round 1's statistics), and train it
on all of D_r with the engine's loss.  The engines differ only in the proposal, the flow's direction
(q(theta | s) or q(s | theta)) and the loss: :class:`RoundLoop` takes those as functions.

Random streams (fixed per seed, in this order): ``rng_sim`` (prior draws, simulations, RQMC
scrambles), ``rng_split`` (validation rows), the torch ``generator`` (mini-batch order, replicate
picks, atoms) and torch's global generator (flow initialisation and flow sampling, seeded by
:func:`~dpposterior.sbi.flows.configure_torch`: zuko's ``sample`` and ``torch.nn`` initialisers
take no generator).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from . import common
from .flows import FlowConfig, pick_replicates, train
from .rqmc import inner_uniforms


@dataclass
class SBIResult:
    theta: np.ndarray
    flow: torch.nn.Module
    rounds: list = field(default_factory=list)
    data: dict = field(default_factory=dict)
    sampler: object = None
    log_likelihood: object = None
    #: SPPE with correction="importance" or "auto": the :class:`~dpposterior.sbi.importance.ImportanceResult`
    importance: object = None
    #: whether ``theta`` is the importance posterior (else the last flow's draws)
    importance_applied: bool = False


def check_round_memory(model, simulations: int, rounds: int, rqmc_points: int, method: str) -> None:
    """Refuse, before the first simulation, a run whose filtration D_R would not fit in memory.

    What :class:`RoundLoop` holds at the last round, per simulation (d parameters, r released values, M
    replicates): theta, s(x) and the M privatised replicates as float64 arrays (8 (d + r + M r) bytes), their
    float32 device tensors (4 (d + M r)), one more of each while a round's are concatenated in, and the round's own
    simulation arrays (the same per-simulation bytes for the N of one round).  The flow and its optimiser are
    small beside these from about 10^5 simulations on."""
    from ..memory import check_fits

    d, r, m = int(model.dim), int(model.stat_dim), max(1, int(rqmc_points))
    per_simulation = 8.0 * (d + r + m * r) + 2 * 4.0 * (d + m * r)
    total = simulations * rounds
    estimate = per_simulation * (2 * total + simulations)
    check_fits(estimate, "simulations", f"{method}: {rounds} rounds x {simulations:,} simulations, each with "
               f"{m} replicate(s) of {r} released values", "fewer --simulations, --rounds or --rqmc-points")


def simulate_round(model, theta, m, rqmc, rng):
    """Confidential statistics s(x_i) and M privatised replicates per simulation: (s (N, r), sdp (N, M, r))."""
    s = model.statistics(theta, rng)
    u = inner_uniforms(len(theta), m, model.stat_dim, rng, rqmc=rqmc)
    sdp = model.privatize_u(s[:, None, :], u)
    return s, sdp


def next_round(model, r, simulations, propose, rqmc_points, rqmc, rng_sim, rng_split, validation_fraction, watch):
    """One round's proposals, privatised replicates and validation mask (SPPE and SPLE alike).

    Round 1 proposes from the prior, later rounds with ``propose(n)``.
    Returns (theta, confidential statistics s, sdp, validation mask, simulation seconds).
    """
    theta = model.prior.sample(simulations, rng_sim) if r == 1 else propose(simulations)
    watch.lap()
    s, sdp = simulate_round(model, theta, rqmc_points, rqmc, rng_sim)
    sim_seconds = watch.lap()
    n_val = max(1, int(round(validation_fraction * simulations)))
    val = np.zeros(simulations, bool)
    val[rng_split.choice(simulations, n_val, replace=False)] = True
    return theta, s, sdp, val, sim_seconds


class RoundLoop:
    """D_r and the flow of one SPPE / SPLE run; :meth:`run` is the round loop.

    After each round's simulations are appended, ``theta`` (n, d), ``sdp`` (n, M, r), ``log_prior`` (n,)
    (when ``with_log_prior``) are device tensors of all rounds, ``validation`` the numpy mask of held-out
    rows, ``first_round`` the number of round-1 (prior) simulations, and ``flow`` the flow being trained.
    """

    def __init__(self, model, simulations: int, rqmc_points: int, rqmc: bool, rng_sim, rng_split,
                 config: FlowConfig, generator: torch.Generator, with_log_prior: bool = False):
        self.model = model
        self.simulations = simulations
        self.rqmc_points = rqmc_points
        self.rqmc = rqmc
        self.rng_sim = rng_sim
        self.rng_split = rng_split
        self.config = config
        self.round_config = config
        self.generator = generator
        self.device = generator.device
        self.with_log_prior = with_log_prior
        self.flow = None
        self.rounds: list[dict] = []
        self._thetas, self._stats, self._sdps, self._log_priors, self._is_val = [], [], [], [], []
        self.theta = self.sdp = self.log_prior = self.validation = None
        self.first_round = 0
        self._watch = None

    def _tensor(self, parts):
        return torch.as_tensor(np.concatenate(parts), dtype=torch.float32, device=self.device)

    def _append(self, theta, s, sdp, val):
        self._thetas.append(theta)
        self._stats.append(s)
        self._sdps.append(sdp)
        if self.with_log_prior:
            self._log_priors.append(self.model.prior.log_prob(theta))
        self._is_val.append(val)
        self.first_round = len(self._thetas[0])
        self.theta = self._tensor(self._thetas)
        self.sdp = self._tensor(self._sdps)
        if self.with_log_prior:
            self.log_prior = self._tensor(self._log_priors)
        self.validation = np.concatenate(self._is_val)

    def replicates(self, idx: torch.Tensor) -> torch.Tensor:
        """The replicates of rows ``idx`` for one loss evaluation: the round's ``replicates_per_step`` picked
        per row while training (an unbiased stochastic gradient of the nested estimator), all M otherwise."""
        k = self.round_config.replicates_per_step if self.flow.training else None
        return pick_replicates(self.sdp[idx], k, self.generator)

    def data(self) -> dict:
        """All rounds' parameters, confidential statistics s(x) and privatised replicates, and each row's round."""
        return {"theta": np.concatenate(self._thetas), "statistics": np.concatenate(self._stats),
                "sdp": np.concatenate(self._sdps),
                "round": np.repeat(np.arange(1, len(self._thetas) + 1), [len(t) for t in self._thetas])}

    def run(self, rounds: int, propose, make_flow, round_loss, *, description: str, quiet: bool,
            round_callback=None, sample_posterior=None, after_train=None, train_last: bool = True) -> None:
        """Run ``rounds`` rounds.

        ``propose(n)``: proposals of rounds >= 2; ``make_flow(theta, sdp)``: the flow, built on round 1's
        simulations; ``round_loss(r)``: the mean loss ``batch_loss(idx)`` of rows idx for round r;
        ``after_train(r)``: extra entries of the round's info (called after training);
        ``round_callback(r, sample_posterior, info)`` after each round.  ``train_last=False``: the last
        round only simulates (its flow is not refit; :meth:`train_round` can do it later).
        """
        self._watch = common.Stopwatch()
        with common.round_progress(rounds, description, quiet) as advance:
            for r in range(1, rounds + 1):
                theta, s, sdp, val, sim_seconds = next_round(self.model, r, self.simulations, propose,
                                                             self.rqmc_points, self.rqmc, self.rng_sim,
                                                             self.rng_split, self.config.validation_fraction,
                                                             self._watch)
                if self.flow is None:
                    self.flow = make_flow(theta, sdp).to(self.device)
                self._append(theta, s, sdp, val)
                info = {"round": r, "simulations": len(self.theta), "epochs": 0, "val_loss": float("nan"),
                        "sim_seconds": sim_seconds, "train_seconds": 0.0, "trained": False}
                self.rounds.append(info)
                if r < rounds or train_last:
                    self.train_round(r, round_loss, after_train)
                if round_callback is not None:
                    round_callback(r, sample_posterior, info)
                advance(info=f"{len(self.theta)} sims, {info['epochs']} epochs")

    def train_round(self, r: int, round_loss, after_train=None) -> dict:
        """Fit the flow on all of D_r with round r's loss and settings; updates and returns round r's info."""
        watch = self._watch or common.Stopwatch()
        watch.lap()
        self.round_config = self.config.for_round(r)
        batch_loss = round_loss(r)
        stats = train(self.flow, batch_loss, len(self.theta), np.flatnonzero(self.validation),
                      np.flatnonzero(~self.validation), self.round_config, self.generator)
        extra = after_train(r) if after_train is not None else None
        info = self.rounds[r - 1]
        info.update({"epochs": stats["epochs"], "val_loss": stats["best_val"], "train_seconds": watch.lap(),
                     "trained": True})
        info.update(extra or {})
        return info
