"""Drawing release noise for the curator.

Without a seed the noise comes from OpenDP's samplers (cryptographically secure,
floating-point-safe); with a seed it comes from numpy so a release can be
reproduced in tests and simulations.  The sampler used is recorded in the file.
"""

from __future__ import annotations

import numpy as np


def draw_noise(mechanism: str, values, scale: float, seed: int | None = None):
    """Return (noisy values, sampler name).  ``scale`` is b for Laplace, sigma for Gaussian."""
    values = np.asarray(values, dtype=float)
    if seed is None:
        try:
            return _opendp(mechanism, values, scale), _opendp_name()
        except ImportError:  # pragma: no cover - opendp is a hard dependency
            pass
    rng = np.random.default_rng(seed)
    if mechanism == "laplace":
        noise = rng.laplace(0.0, scale, size=values.shape)
    elif mechanism == "gaussian":
        noise = rng.normal(0.0, scale, size=values.shape)
    else:
        raise ValueError(f"mechanism: cannot draw noise for {mechanism!r}")
    return values + noise, f"numpy-{np.__version__} (seed {seed})"


def _opendp_name():
    import opendp

    version = getattr(opendp, "__version__", None)
    if version is None:  # opendp 0.16 has no __version__; the installed distribution knows it
        from importlib.metadata import PackageNotFoundError, version as dist_version

        try:
            version = dist_version("opendp")
        except PackageNotFoundError:  # pragma: no cover
            version = "unknown"
    return f"opendp-{version}"


def _opendp(mechanism: str, values: np.ndarray, scale: float) -> np.ndarray:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if mechanism == "laplace":
        meas = dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=float(scale))
    elif mechanism == "gaussian":
        meas = dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=float(scale))
    else:
        raise ValueError(f"mechanism: cannot draw noise for {mechanism!r}")
    flat = [float(v) for v in values.ravel()]
    return np.asarray(meas(flat), dtype=float).reshape(values.shape)
