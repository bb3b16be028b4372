"""Conditional neural spline flows (zuko) and the training loop shared by SPPE and SPLE.

Xiong, Ju & Zhang App. E: neural spline flow (Durkan et al. 2019) with 8 flow
layers (transforms), each conditioner an MLP of two residual blocks of 50 ReLU
units, 10 bins per monotonic rational-quadratic spline, tail bound 5 (zuko's
default domain [-5, 5]).  Adam, learning rate 5e-4, weight decay 1e-4, batch
100, 5% of each round's new simulations held out, early stopping after 20 epochs
without improvement of the validation loss (Papamakarios et al. 2019).

Inputs and contexts are z-scored with statistics of the first round (as sbi
does) so the spline domain [-5, 5] covers the data; ``log_prob`` adds the
Jacobian of that affine map, so it is a density in the original units.

Speed (the atomic loss evaluates batch x atoms = 1,000 flow densities per SGD
step, and SPPE takes tens of thousands of steps): the spline bins are
normalised by an explicit exp/sum instead of ``torch.softmax``, whose CPU
kernel is about 5x slower over a 10-wide last axis (about a fifth of a whole
training step here); Adam uses torch's fused CPU kernel.  Both are the same
mathematics as zuko's NSF and torch's Adam (``tests/test_sbi.py`` checks the
densities agree).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
import zuko
from zuko.transforms import MonotonicRQSTransform


@dataclass
class FlowConfig:
    transforms: int = 8
    hidden: tuple = (50, 50)
    bins: int = 10
    learning_rate: float = 5e-4
    weight_decay: float = 1e-4
    batch_size: int = 100
    validation_fraction: float = 0.05
    patience: int = 20
    #: hard cap on epochs per round (the paper has none; keeps wall time bounded)
    max_epochs: int = 200
    #: RQMC replicates per simulation used in one SGD step (None = all M).  The
    #: objective stays the nested estimator (11) averaged over all M replicates;
    #: a random subset per step is an unbiased stochastic gradient of it (the
    #: validation loss, which drives early stopping, uses all M).
    replicates_per_step: int | None = 1
    #: overrides of these fields for round 1's training (e.g. ``{"replicates_per_step": None}``);
    #: None = round 1 trains like the later rounds
    first_round: dict | None = None
    #: exponential moving average of the weights (Polyak averaging; decay per SGD step, e.g. 0.98), used
    #: for validation, early stopping and the returned flow; None = the raw SGD iterate (the paper)
    ema_decay: float | None = None

    def for_round(self, r: int) -> "FlowConfig":
        """The settings of round r's training (``first_round`` applied on round 1)."""
        if r == 1 and self.first_round:
            return dataclasses.replace(self, first_round=None, **self.first_round)
        return self


def resolve_device(device: str | torch.device | None = "cpu") -> torch.device:
    """"cpu", "cuda" (or "cuda:N") or "auto" (CUDA when available, else CPU) -> torch.device."""
    if device is None:
        device = "cpu"
    if isinstance(device, torch.device):
        return device
    name = str(device).strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            from ..errors import InputError

            raise InputError("device", f"{device!r} requested but torch sees no CUDA device")
        return torch.device(name)
    if name == "cpu":
        return torch.device("cpu")
    from ..errors import InputError

    raise InputError("device", f"must be cpu, cuda or auto (got {device!r})")


def configure_torch(seed: int) -> None:
    """Seed torch from the run's seed and use few threads (the machine has 2 shared cores)."""
    torch.manual_seed(int(seed) % (2**63))
    threads = int(os.environ.get("DPPOSTERIOR_TORCH_THREADS", "1"))
    if torch.get_num_threads() != threads:
        torch.set_num_threads(max(1, threads))


def _softmax_last(x: torch.Tensor) -> torch.Tensor:
    """softmax over the last axis by exp/sum: torch's CPU softmax kernel is slow on short rows."""
    e = torch.exp(x - x.amax(dim=-1, keepdim=True).detach())
    return e / e.sum(dim=-1, keepdim=True)


class RQSTransform(MonotonicRQSTransform):
    """zuko's monotonic rational-quadratic spline, knots built with :func:`_softmax_last`.

    Same parameterisation as ``MonotonicRQSTransform.__init__`` (zuko 1.x); only the
    softmax kernel differs, so trained states are interchangeable with ``zuko.flows.NSF``.
    """

    def __init__(self, widths, heights, derivatives, bound: float = 5.0, slope: float = 1e-3, **kwargs):
        torch.distributions.Transform.__init__(self, **kwargs)
        widths = widths / (1 + abs(2 * widths / math.log(slope)))
        heights = heights / (1 + abs(2 * heights / math.log(slope)))
        derivatives = derivatives / (1 + abs(derivatives / math.log(slope)))
        widths = F.pad(_softmax_last(widths), (1, 0), value=0)
        heights = F.pad(_softmax_last(heights), (1, 0), value=0)
        derivatives = F.pad(derivatives, (1, 1), value=0)
        self.horizontal = bound * (2 * torch.cumsum(widths, dim=-1) - 1)
        self.vertical = bound * (2 * torch.cumsum(heights, dim=-1) - 1)
        self.derivatives = torch.exp(derivatives)


def neural_spline_flow(features: int, context: int, config: "FlowConfig", slope: float = 1e-3) -> zuko.flows.MAF:
    """``zuko.flows.NSF(features, context, bins, transforms, hidden_features)`` with :class:`RQSTransform`."""
    # zuko conditions a 1-feature spline with a plain MLP (no masks), which has no residual option
    extra = {"residual": True} if features > 1 else {}
    return zuko.flows.MAF(features, context, transforms=config.transforms,
                          univariate=partial(RQSTransform, slope=slope),
                          shapes=[(config.bins,), (config.bins,), (config.bins - 1,)],
                          hidden_features=tuple(config.hidden), **extra)


class StandardizedFlow(torch.nn.Module):
    """q(y | c) = NSF(standardize(y) | standardize(c)) / prod(y_std)."""

    def __init__(self, features: int, context: int, y_mean, y_std, c_mean, c_std, config: FlowConfig):
        super().__init__()
        self.flow = neural_spline_flow(features, context, config)
        self.register_buffer("y_mean", torch.as_tensor(y_mean, dtype=torch.float32))
        self.register_buffer("y_std", torch.as_tensor(y_std, dtype=torch.float32))
        self.register_buffer("c_mean", torch.as_tensor(c_mean, dtype=torch.float32))
        self.register_buffer("c_std", torch.as_tensor(c_std, dtype=torch.float32))
        # float32 throughout, whatever torch's global default dtype the caller has set
        self.float()

    def log_prob(self, y: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        yz = (y - self.y_mean) / self.y_std
        cz = (c - self.c_mean) / self.c_std
        return self.flow(cz).log_prob(yz) - torch.log(self.y_std).sum()

    @torch.no_grad()
    def sample(self, c: torch.Tensor, n: int) -> torch.Tensor:
        """n draws of y given a single context c (1-d)."""
        cz = (c - self.c_mean) / self.c_std
        yz = self.flow(cz).sample((n,))
        return yz * self.y_std + self.y_mean


def pick_replicates(sdp: torch.Tensor, k: int | None, generator: torch.Generator | None) -> torch.Tensor:
    """sdp (B, M, r) -> (B, k, r): k replicates per row drawn uniformly without replacement."""
    b, m, r = sdp.shape
    if k is None or k >= m:
        return sdp
    device = generator.device if generator is not None else sdp.device
    order = torch.argsort(torch.rand(b, m, generator=generator, device=device), dim=1)[:, :k]
    return torch.gather(sdp, 1, order[:, :, None].expand(b, k, r))


def robust_scale(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, float).reshape(-1, a.shape[-1])
    mean = a.mean(axis=0)
    std = a.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    return mean, std


def train(module: torch.nn.Module, batch_loss, n_train: int, val_index: np.ndarray, train_index: np.ndarray,
          config: FlowConfig, generator: torch.Generator) -> dict:
    """Minimise ``batch_loss(index_tensor)`` (mean loss of those rows) with early stopping.

    Returns {"epochs", "best_val", "train_loss"}; ``module`` ends at the best validation state.
    """
    opt = torch.optim.Adam(module.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay,
                           fused=True)
    device = generator.device
    train_idx = torch.as_tensor(train_index, dtype=torch.long, device=device)
    val_idx = torch.as_tensor(val_index, dtype=torch.long, device=device)
    best = math.inf
    best_state = copy.deepcopy(module.state_dict())
    since_best = 0
    epoch = 0
    last_train = math.nan
    params = [p for p in module.parameters() if p.requires_grad]
    ema = iterate = None
    if config.ema_decay is not None:
        if not 0.0 < config.ema_decay < 1.0:
            raise ValueError(f"ema_decay must lie in (0, 1) (got {config.ema_decay})")
        ema = [p.detach().clone() for p in params]
        iterate = [p.detach().clone() for p in params]
    while epoch < config.max_epochs:
        epoch += 1
        module.train()
        perm = train_idx[torch.randperm(len(train_idx), generator=generator, device=device)]
        total = torch.zeros((), device=device)
        for start in range(0, len(perm), config.batch_size):
            idx = perm[start:start + config.batch_size]
            if len(idx) < 2:
                continue
            loss = batch_loss(idx)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 5.0)
            opt.step()
            if ema is not None:
                with torch.no_grad():
                    torch._foreach_lerp_(ema, params, 1.0 - config.ema_decay)
            total += loss.detach() * len(idx)   # no host sync per step (matters on a GPU)
        last_train = float(total) / max(len(perm), 1)
        module.eval()
        with torch.no_grad():
            if ema is not None:   # validate (and keep) the averaged weights; the SGD iterate goes on below
                torch._foreach_copy_(iterate, params)
                torch._foreach_copy_(params, ema)
            val = 0.0
            for start in range(0, len(val_idx), 500):
                idx = val_idx[start:start + 500]
                val += float(batch_loss(idx)) * len(idx)
            val /= max(len(val_idx), 1)
        improved = val < best - 1e-9
        if improved:
            best = val
            best_state = copy.deepcopy(module.state_dict())
            since_best = 0
        if ema is not None:
            with torch.no_grad():
                torch._foreach_copy_(params, iterate)
        if not improved:
            since_best += 1
            if since_best >= config.patience:
                break
    module.load_state_dict(best_state)
    return {"epochs": epoch, "best_val": best, "train_loss": last_train}
