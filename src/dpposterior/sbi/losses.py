"""The training losses of the flow engines (Xiong, Ju & Zhang eqs. 5, 6, 8 with the nested estimator 11).

* :func:`npe_loss` -- l_PPE (eq. 6), SPPE's round 1 and its truncated (TSNPE) rounds;
* :func:`atomic_loss` -- l_PPE-A (eq. 8, APT / SNPE-C, Greenberg et al. 2019), SPPE's atomic rounds,
  with :func:`atom_indices` drawing the contrasting atoms from the mini-batch;
* :func:`ple_loss` -- l_PLE (eq. 5), SPLE's likelihood loss on every round.

Every loss takes the flow's ``log_prob`` and the privatised replicates ``sdp`` of shape (B, M, r) (M RQMC
replicates per simulation, or the k of them picked for one SGD step) and averages over i and j.
"""

from __future__ import annotations

import torch


def npe_loss(log_prob, theta: torch.Tensor, sdp: torch.Tensor) -> torch.Tensor:
    """Nested estimator of l_PPE (eq. 6 with eq. 11): theta (B, d), sdp (B, M, r); q = q(theta | s)."""
    b, m, _ = sdp.shape
    th = theta[:, None, :].expand(b, m, theta.shape[-1])
    return -log_prob(th, sdp).mean()


def ple_loss(log_prob, theta: torch.Tensor, sdp: torch.Tensor) -> torch.Tensor:
    """Nested estimator of l_PLE (eq. 5 with eq. 11): theta (B, d), sdp (B, M, r); q = q(s | theta)."""
    b, m, _ = sdp.shape
    th = theta[:, None, :].expand(b, m, theta.shape[-1])
    return -log_prob(sdp, th).mean()


def atom_indices(batch: int, num_atoms: int, generator: torch.Generator | None = None,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """(B, n_a) indices: row i starts with i, then n_a - 1 distinct other rows of the batch.

    O(B * n_a): one draw of n_a - 1 distinct offsets in 1..B-1 and row i takes rows
    (i + offset) mod B.  The mini-batch is itself a uniformly random subset in random
    order, so each row's contrasting atoms are a uniformly random set of other rows
    (a B x B ``torch.multinomial`` would cost 45 ms at B = 1,000, 3.9 s at 10,000).
    """
    num_atoms = min(num_atoms, batch)
    if device is None:
        device = generator.device if generator is not None else "cpu"
    own = torch.arange(batch, device=device)[:, None]
    if num_atoms == batch:
        offsets = torch.arange(1, batch, device=device)
    else:
        offsets = torch.randperm(batch - 1, generator=generator, device=device)[:num_atoms - 1] + 1
    return torch.cat([own, (own + offsets[None, :]) % batch], dim=1)


def atomic_loss(log_prob, theta: torch.Tensor, log_prior: torch.Tensor, sdp: torch.Tensor,
                num_atoms: int = 10, generator: torch.Generator | None = None) -> torch.Tensor:
    """Nested RQMC estimate of the APT loss l_PPE-A (eq. 8): mean over i, j of -log q~(theta_i | s_ij).

    theta (B, d), log_prior (B,) = log pi(theta), sdp (B, M, r); atoms from the batch.
    """
    b, m, r = sdp.shape
    idx = atom_indices(b, num_atoms, generator, theta.device)         # (B, A)
    a = idx.shape[1]
    th = theta[idx][:, None, :, :].expand(b, m, a, theta.shape[-1])   # (B, M, A, d)
    ctx = sdp[:, :, None, :].expand(b, m, a, r)                        # (B, M, A, r)
    logits = log_prob(th, ctx) - log_prior[idx][:, None, :]           # (B, M, A)
    return -(logits[..., 0] - torch.logsumexp(logits, dim=-1)).mean()
