"""Rates in units a reader can take in: small rates per 1,000 or per 100,000, printed with significant digits.

A small-area posterior stores its rates as they are (deaths per birth: 0.0021); the terminal table, the
report's figures and its maps show them scaled (2.1 per 1,000), with the unit in the caption or axis label.
Only the presentation changes: files and ``Posterior.posterior`` keep the rates themselves.
"""

from __future__ import annotations

import math

import numpy as np

#: (factor, words) from the largest unit down: chosen by the magnitude of the posterior medians
RATE_UNITS = ((1.0, ""), (1_000.0, "per 1,000"), (100_000.0, "per 100,000"))
#: components whose medians choose the unit (evenly spaced over a large variable)
UNIT_SAMPLE = 1000


def rate_unit(medians) -> tuple[float, str]:
    """``(factor, words)`` for rates whose posterior medians are ``medians``: unscaled ("") when the typical
    (median) magnitude is at least 0.01, per 1,000 down to 0.0001, per 100,000 below."""
    m = np.asarray(medians, dtype=float).reshape(-1)
    m = np.abs(m[np.isfinite(m)])
    typical = float(np.median(m)) if m.size else 0.0
    if typical == 0.0 or typical >= 0.01:
        return RATE_UNITS[0]
    return RATE_UNITS[1] if typical >= 0.0001 else RATE_UNITS[2]


def rate_unit_of_draws(draws: np.ndarray) -> tuple[float, str]:
    """:func:`rate_unit` of a (chain, draw, *event) array: the medians of at most :data:`UNIT_SAMPLE`
    components, evenly spaced."""
    arr = np.asarray(draws)
    flat = arr.reshape(arr.shape[0] * arr.shape[1], -1)
    k = flat.shape[1]
    pick = np.unique(np.linspace(0, k - 1, min(k, UNIT_SAMPLE)).round().astype(int))
    return rate_unit(np.median(flat[:, pick], axis=0))


def unit_label(name: str, words: str) -> str:
    """``rate per 1,000`` (or ``rate`` when unscaled)."""
    return f"{name} {words}" if words else name


def significant(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits in plain notation (0.00213, 2.13, 213, 21300 -> 21300): never
    0 for a nonzero value."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x == 0.0:
        return "0"
    if not 1e-4 <= abs(x) < 1e7:
        return f"{x:.{digits}g}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    rounded = round(x, decimals)
    if rounded != 0.0 and int(math.floor(math.log10(abs(rounded)))) > int(math.floor(math.log10(abs(x)))):
        decimals = max(0, decimals - 1)  # 0.9996 -> 1.00, not 1.000
    return f"{rounded:.{decimals}f}"
