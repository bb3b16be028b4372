"""Drawing release noise for the curator.

Without a seed the noise comes from OpenDP's samplers (cryptographically secure,
floating-point-safe); with a seed it comes from numpy so a release can be
reproduced in tests and simulations.  The sampler used is recorded in the file.

numpy's floating-point Laplace and Gaussian samplers are NOT safe for publication:
the low-order bits of a textbook floating-point sample leak the true value (Mironov,
"On significance of the least significant bits for differential privacy", CCS 2012).
The seeded path is for reproducible studies; its ``sampler`` string says so, and
``dpposterior release --seed`` prints a warning.

:func:`exact_statistics` (for ``dpposterior audit``'s sensitivity search) makes
``draw_noise`` return the statistic unchanged, so the search runs the curator's own
clamping and statistic code.
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from ..errors import InputError
from .base import Mechanism

#: set inside :func:`exact_statistics`: draw_noise returns its input (the audit's statistic probe)
_EXACT = contextvars.ContextVar("dpposterior_exact_statistics", default=False)

#: what every seeded release says about itself
SEEDED_NOTE = "reproducible, not for publication: floating-point noise, Mironov 2012"
#: ... and what a seeded integer-noise release says (an exact sampler, but a seeded, predictable generator)
SEEDED_INTEGER_NOTE = "reproducible, not for publication: exact integer sampler on a seeded numpy generator"


def seeded_sampler_name(seed) -> str:
    """The ``sampler`` string of numpy noise drawn from ``seed``."""
    return f"numpy-{np.__version__} (seed {seed}; {SEEDED_NOTE})"


@contextlib.contextmanager
def exact_statistics():
    """Within this block the curators release their exact statistics (NO noise): audit only."""
    token = _EXACT.set(True)
    try:
        yield
    finally:
        _EXACT.reset(token)


def draw_noise(mechanism: str, values, scale: float, seed: int | None = None):
    """Return (noisy values, sampler name).  ``scale`` is b for Laplace, sigma for Gaussian."""
    values = np.asarray(values, dtype=float)
    if _EXACT.get():
        return values.copy(), "exact (audit probe, no noise)"
    from .registry import get_mechanism

    try:
        kind = get_mechanism(mechanism)
    except InputError:
        raise ValueError(f"mechanism: cannot draw noise for {mechanism!r}") from None
    if seed is None:
        if kind.opendp_noise.__func__ is Mechanism.opendp_noise.__func__:
            raise ValueError(f"mechanism: {mechanism!r} has no publication sampler (opendp_noise): give --seed for "
                             "a reproducible study release, which is not for publication")
        try:
            return kind.opendp_noise(values, scale), kind.publication_sampler()
        except ImportError:  # pragma: no cover - opendp is a hard dependency
            pass
    rng = np.random.default_rng(seed)
    name = seeded_sampler_name(seed)
    if kind.integer_valued:  # exact integer samplers on numpy's (non-cryptographic) generator
        name = f"numpy-{np.__version__} (seed {seed}; {SEEDED_INTEGER_NOTE})"
    return values + kind.numpy_noise(scale, values.shape, rng), name
