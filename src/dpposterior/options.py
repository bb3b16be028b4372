"""Engine options: what every engine receives as ``engine(release, prior, options)``.

:class:`InferenceOptions` sits below the engines and the orchestrator (``dpposterior.api``), so an
engine can name its options' type without importing the code that calls it (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputError, check_seed


#: the most draws (all chains together) one inference may ask for: 2e7 draws of a 10-dimensional
#: posterior are 1.6 GB of float64, beyond that requests (e.g. --draws 100000000000) exhaust memory
MAX_TOTAL_DRAWS = 20_000_000


@dataclass
class InferenceOptions:
    method: str = "auto"
    draws: int = 5000
    #: None in a batched calibration path means the engine's own default warmup
    warmup: int | None = 1000
    chains: int = 4
    #: an int (validated); a batched calibration path (``families.EngineSpec.batch``) may instead receive
    #: the trial's ``numpy.random.SeedSequence`` child, which it hands to ``numpy.random.default_rng``
    seed: "int | np.random.SeedSequence | None" = None
    constrained: bool = False
    #: engine-specific options (analysis-file keys, CLI options such as simulations)
    extra: dict[str, Any] = field(default_factory=dict)
    quiet: bool = True
    scheduler: str = "serial"

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def validate(self) -> "InferenceOptions":
        for name in ("draws", "chains"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InputError(name, f"must be an integer >= 1 (got {value!r})")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, (int, np.integer)) or self.warmup < 0:
            raise InputError("warmup", f"must be an integer >= 0 (got {self.warmup!r})")
        check_seed(self.seed, "seed")
        if not isinstance(self.constrained, bool):
            raise InputError("constrained", "must be true or false")
        if self.draws * self.chains > MAX_TOTAL_DRAWS:
            raise InputError("draws", f"{self.draws} draws x {self.chains} chains is more than {MAX_TOTAL_DRAWS:g} "
                             "draws in all: the posterior would not fit in memory")
        if self.warmup > MAX_TOTAL_DRAWS:
            raise InputError("warmup", f"must be at most {MAX_TOTAL_DRAWS:g} (got {self.warmup})")
        return self
