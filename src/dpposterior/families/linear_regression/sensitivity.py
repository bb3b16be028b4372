"""Replace-one sensitivities of one record's (upper(xx'), xy[, y^2]) (the derivation: the package docstring)."""

from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import InputError
from ...mechanisms.registry import MECHANISMS


def design_row_norm(x_norm: float, intercept: bool) -> float:
    """Bound on ||[1, x]|| (or ||x||) from the feature-row bound ``x_norm``."""
    return math.sqrt(x_norm ** 2 + 1.0) if intercept else x_norm


#: which per-record blocks each released statistic holds (the mechanism's input is their concatenation)
_BLOCKS = ("xtx", "xty", "yty")


def _l2_sq_objective(v, intercept, w):
    """||f(x, y) - f(x', y')||_2^2 in the invariants v = (r, r', c, y, y') (module docstring)."""
    r, rp, c, y, yp = v
    out = 0.0
    if w[0]:
        out = out + r ** 4 + rp ** 4 - 2 * r * r * rp * rp * c * c
        if intercept:
            out = out + r * r + rp * rp - 2 * r * rp * c
    if w[1]:
        out = out + r * r * y * y + rp * rp * yp * yp - 2 * r * rp * c * y * yp
        if intercept:
            out = out + (y - yp) ** 2
    if w[2]:
        out = out + (y * y - yp * yp) ** 2
    return out


@functools.lru_cache(maxsize=256)
def _l2_replace_one(x_norm: float, y_abs: float, d_x: int, intercept: bool, blocks: tuple) -> float:
    """max over the invariants of the squared L2 distance, by a grid and bounded polishing."""
    from scipy.optimize import minimize

    w = tuple(b in blocks for b in _BLOCKS)
    X, Y = float(x_norm), float(y_abs)
    grid = 9
    rs = np.linspace(0.0, X, grid)
    ys = np.linspace(-Y, Y, 2 * grid - 1)
    cs = np.linspace(-1.0, 1.0, 2 * grid - 1) if d_x >= 2 else np.array([-1.0, 1.0])
    R, RP, C, Yv, YP = np.meshgrid(rs, rs, cs, ys, ys, indexing="ij", sparse=True)
    vals = _l2_sq_objective((R, RP, C, Yv, YP), intercept, w)
    vals = np.broadcast_to(vals, (grid, grid, len(cs), len(ys), len(ys)))
    flat = vals.ravel()
    top = np.argpartition(flat, -8)[-8:]
    top = top[np.argsort(flat[top])]
    best = float(flat[top[-1]])
    bounds = [(0.0, X), (0.0, X), (-1.0, 1.0), (-Y, Y), (-Y, Y)]
    for idx in top:
        i = np.unravel_index(idx, vals.shape)
        v0 = np.array([rs[i[0]], rs[i[1]], cs[i[2]], ys[i[3]], ys[i[4]]])
        if d_x >= 2:
            res = minimize(lambda v: -_l2_sq_objective(v, intercept, w), v0, method="L-BFGS-B",
                           bounds=bounds)
        else:  # one free feature: x and x' are collinear, c = +-1 fixed
            c0 = v0[2]
            res = minimize(lambda v: -_l2_sq_objective((v[0], v[1], c0, v[2], v[3]), intercept, w),
                           np.delete(v0, 2), method="L-BFGS-B", bounds=bounds[:2] + bounds[3:])
        best = max(best, float(-res.fun))
    return math.sqrt(best)


def _l1_replace_one(x_norm: float, y_abs: float, d_x: int, intercept: bool, blocks: tuple) -> float:
    """Upper bound on the L1 replace-one sensitivity: the sum of the blocks' worst cases (docstring)."""
    X, Y = float(x_norm), float(y_abs)
    out = 0.0
    if "xtx" in blocks:
        out += (d_x + 1) * X ** 2 if d_x >= 2 else X ** 2
        if intercept:  # entries (0, b) = x_b - x'_b
            out += 2.0 * math.sqrt(d_x) * X
    if "xty" in blocks:
        out += 2.0 * math.sqrt(d_x) * X * Y + (2.0 * Y if intercept else 0.0)
    if "yty" in blocks:
        out += Y ** 2
    return out


def replace_one_sensitivity(mechanism: str, blocks, x_norm: float, y_abs: float, d: int,
                            intercept: bool = False) -> float:
    """Replace-one sensitivity of the statistics ``blocks`` (a subset of xtx, xty, yty) released as
    ONE mechanism, in the norm the mechanism measures it in: L2 (gaussian; the exact worst case) or L1
    (laplace; an upper bound).

    ``x_norm`` bounds the feature row WITHOUT the intercept's 1; ``d`` is the design dimension
    (features + 1 with an intercept).  Derivation in the module docstring.
    """
    blocks = tuple(b for b in _BLOCKS if b in set(blocks))
    if not blocks:
        raise ValueError("blocks: name at least one of xtx, xty, yty")
    d_x = int(d) - (1 if intercept else 0)
    if d_x < 1:
        raise ValueError("d: at least one feature")
    # X^4 and Y^4 enter the L2 sensitivity: beyond 1e75 they overflow double precision
    for name, v in (("x_norm", x_norm), ("y_abs", y_abs)):
        if not (math.isfinite(v) and 0 < v <= 1e75):
            raise InputError(f"bounds.{name}", f"must be a finite number in (0, 1e75] (got {v:g}): its 4th power "
                             "must be finite")
    norm = getattr(MECHANISMS.get(mechanism), "sensitivity_norm", None)
    if norm == "L2":
        return _l2_replace_one(float(x_norm), float(y_abs), d_x, bool(intercept), blocks)
    if norm == "L1":
        return _l1_replace_one(x_norm, y_abs, d_x, intercept, blocks)
    raise ValueError(f"mechanism: {mechanism!r} has no linear-regression sensitivity")


def separate_sensitivity(mechanism: str, name: str, x_norm: float, y_abs: float, d: int,
                         intercept: bool = False) -> float:
    """Replace-one sensitivity of one statistic released on its own (L2 gaussian, L1 laplace)."""
    return replace_one_sensitivity(mechanism, (name,), x_norm, y_abs, d, intercept)


def joint_sensitivity(mechanism: str, x_norm: float, y_abs: float, d: int, with_yty: bool,
                      intercept: bool = False) -> float:
    """Replace-one sensitivity of one row's [upper(xx'), x y, (y^2)] as one mechanism."""
    blocks = ("xtx", "xty", "yty") if with_yty else ("xtx", "xty")
    return replace_one_sensitivity(mechanism, blocks, x_norm, y_abs, d, intercept)
