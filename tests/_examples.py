"""Each registered family's example for the registry-driven tests (tests/test_engine_options.py,
tests/test_registry_coverage.py): its simulator's release from the default prior (n = 60,
epsilon = 1, seed 3), made once per test session."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from dpposterior.families import get_family


@lru_cache(maxsize=None)
def example(family: str):
    """The family's :class:`~dpposterior.families.SimulatedRelease` (release and confidential statistics)."""
    fam = get_family(family)
    assert fam.simulate is not None, f"family {family!r} has no simulate(): no example release to test on"
    return fam.simulate(fam.parse_prior(None, None), 60, 1.0, np.random.default_rng(3))
