"""Vectorised coordinate-wise slice sampling (Neal 2003, stepping out and shrinkage).

State is a (chains, d) array advanced for all chains at once; the log-density is
evaluated only on the chains that still need it.  Used by SPLE to sample the
proposal prop. to pi(theta) q(s_dp^o | theta) (Xiong, Ju & Zhang, Algorithm 2).
"""

from __future__ import annotations

import numpy as np


def _eval_rows(logp, x, k, values, rows):
    xp = x[rows].copy()
    xp[:, k] = values[rows]
    return logp(xp)


def slice_sweep(logp, x, lp, widths, rng, max_steps_out: int = 8, max_shrink: int = 60):
    """One sweep over all coordinates; returns the new (x, lp)."""
    x = x.copy()
    lp = lp.copy()
    c, d = x.shape
    for k in range(d):
        level = lp - rng.exponential(size=c)
        w = widths[k]
        left = x[:, k] - w * rng.random(c)
        right = left + w
        for side, sign in ((0, -1.0), (1, 1.0)):
            active = np.ones(c, bool)
            for _ in range(max_steps_out):
                rows = np.flatnonzero(active)
                if rows.size == 0:
                    break
                edge = left if side == 0 else right
                lpe = _eval_rows(logp, x, k, edge, rows)
                grow = lpe > level[rows]
                active[rows[~grow]] = False
                edge[rows[grow]] += sign * w
        done = np.zeros(c, bool)
        new_x = x[:, k].copy()
        new_lp = lp.copy()
        for _ in range(max_shrink):
            rows = np.flatnonzero(~done)
            if rows.size == 0:
                break
            prop = left[rows] + rng.random(rows.size) * (right[rows] - left[rows])
            full = np.empty(c)
            full[rows] = prop
            lpp = _eval_rows(logp, x, k, full, rows)
            acc = lpp > level[rows]
            new_x[rows[acc]] = prop[acc]
            new_lp[rows[acc]] = lpp[acc]
            done[rows[acc]] = True
            rej = rows[~acc]
            below = prop[~acc] < x[rej, k]
            left[rej[below]] = prop[~acc][below]
            right[rej[~below]] = prop[~acc][~below]
        # chains that never accepted (shrink cap) keep their old value: still a valid kernel
        x[:, k] = new_x
        lp = new_lp
    return x, lp


def slice_sample(logp, init, n_draws: int, rng, warmup: int = 20, thin: int = 1, widths=None):
    """(n_draws per chain, chains, d) after ``warmup`` sweeps; widths adapt during warm-up."""
    x = np.asarray(init, float).copy()
    lp = logp(x)
    if widths is None:
        widths = np.maximum(x.std(axis=0) * 2.0, 1e-3)
    widths = np.asarray(widths, float)
    for it in range(warmup):
        x, lp = slice_sweep(logp, x, lp, widths, rng)
        if it >= warmup // 2 and x.shape[0] > 2:
            widths = np.maximum(2.0 * x.std(axis=0), 1e-3)
    out = np.empty((n_draws, *x.shape))
    for i in range(n_draws):
        for _ in range(thin):
            x, lp = slice_sweep(logp, x, lp, widths, rng)
        out[i] = x
    return out
