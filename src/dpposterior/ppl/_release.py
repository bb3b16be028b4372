"""A release file's observed values and noise laws, ready to condition a model in a probabilistic
programming language on (:func:`from_release`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ._laws import NoiseLaw


@dataclass(frozen=True)
class ReleasedTable:
    """One released table: ``value`` (noisy numbers; integers for integer noise), its ``noise`` law per cell and
    the names of its axes (``dims``; empty for one number or an unnamed vector)."""

    name: str
    value: np.ndarray
    noise: NoiseLaw
    dims: tuple[str, ...] = ()

    @property
    def observed(self) -> np.ndarray:
        """The values as a PPL's observed data: int64 under integer noise, float64 otherwise."""
        return self.value.astype(np.int64) if self.noise.integer_valued else self.value.astype(float)


@dataclass(frozen=True)
class ReleaseData:
    """What :func:`from_release` returns: the validated release (``release``: its public fields, e.g. ``n``,
    ``exposures()``, ``areas``), and each released table by name (``tables``; ``data["counts"]``)."""

    release: object
    tables: dict[str, ReleasedTable]
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def family(self) -> str:
        return str(getattr(self.release, "family", ""))

    def __getitem__(self, name: str) -> ReleasedTable:
        if name in self.tables:
            return self.tables[name]
        if name in self.unavailable:
            raise InputError(name, self.unavailable[name])
        raise InputError("name", f"the release has no table {name!r}; it has: {', '.join(self.tables) or 'none'}")

    def __iter__(self):
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    def __repr__(self) -> str:
        body = "; ".join(f"{t.name}: shape {t.value.shape}, {t.noise.name}" for t in self.tables.values())
        return f"ReleaseData({self.family}: {body})"


def from_release(path) -> ReleaseData:
    """Read a release file (or a parsed dict) and give its observed values and noise laws.

    Each table's noise law comes from the same mechanism objects the release's own engines use (per-cell scales
    included).  A statistic whose mechanism is not additive noise (a binomial trajectory) is listed in
    ``unavailable`` with the reason, and asking for it is a one-line error."""
    from ..release import load_release

    release = load_release(path)
    tables, unavailable = {}, {}
    for name, values, mechanisms, index, dims, *why in release.released_tables():
        if why:
            unavailable[name] = f"has no noise law a model can use ({why[0]})"
            continue
        try:
            law = NoiseLaw(mechanisms, np.zeros(np.shape(values), np.int64) if index is None else index)
        except InputError as exc:
            unavailable[name] = exc.reason
            continue
        values = np.asarray(values, float)
        if law.integer_valued and not np.all(values == np.round(values)):
            raise InputError(name, "holds non-integer values under integer noise")
        tables[name] = ReleasedTable(name, values, law, tuple(dims))
    return ReleaseData(release, tables, unavailable)
