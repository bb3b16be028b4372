"""The mechanisms a release file may name, in one place (docs/architecture.md).

A statistic record's ``mechanism`` string is looked up here -- by the release schema
(``release.StatisticRecord``), by :func:`from_record` and by the curator's noise draw
(``mechanisms.draw_noise``).  Each class brings its own record parsing (``from_record``), noise
scale and noise samplers (numpy, seeded; OpenDP, for publication).  Adding a mechanism is one
module and one entry below (docs/adding-a-mechanism.md); a mechanism defined outside the package is added with
:func:`register`.  Families and engines ask a mechanism for its capabilities, never its name.
"""

from __future__ import annotations

from ..errors import InputError, add_record_fields
from .base import Mechanism, NoiseShape
from .binomial_trajectory import BinomialTrajectory
from .discrete_gaussian import DiscreteGaussian
from .discrete_laplace import DiscreteLaplace
from .gaussian import Gaussian
from .integer import RESERVED_RECORD_FIELDS, IntegerNoise
from .laplace import Laplace
from .skellam import Skellam

#: release-file name -> mechanism class
MECHANISMS: dict[str, type[Mechanism]] = {cls.name: cls for cls in (Laplace, Gaussian, BinomialTrajectory,
                                                                  DiscreteLaplace, DiscreteGaussian, Skellam)}
# a built-in law's own record fields (Skellam's mu) name themselves in validation messages, as register does
for _cls in MECHANISMS.values():
    add_record_fields(getattr(_cls, "record_fields", ()))


def get_mechanism(name, field: str = "mechanism") -> type[Mechanism]:
    """The class registered under ``name``; a one-line error naming ``field`` otherwise."""
    if not isinstance(name, str) or name not in MECHANISMS:
        raise InputError(field, f"unknown mechanism {name!r} (one of: {', '.join(MECHANISMS)})")
    return MECHANISMS[name]


def from_record(record, sensitivity: float | None = None) -> Mechanism:
    """Build the mechanism described by a release's statistic record (see ``release.py``)."""
    return get_mechanism(record.mechanism).from_record(record, sensitivity)


# --------------------------------------------------------------------------- capabilities, asked by name
def _registered(name):
    return MECHANISMS.get(name) if isinstance(name, str) else None


def is_integer_noise(name) -> bool:
    """A registered law of integer, additive, symmetric noise: the count families, naive-bayes, small-area and the
    exact engines take it without naming it (False for None or a name that is not registered)."""
    kind = _registered(name)
    return kind is not None and kind.integer_valued and kind.additive_symmetric


def is_continuous_laplace(name) -> bool:
    """Laplace-shaped noise on the reals (the Laplace scale-mixture engines model exactly that)."""
    kind = _registered(name)
    return kind is not None and kind.noise_shape is NoiseShape.LAPLACE and not kind.integer_valued


def accounts_rho(name) -> bool:
    """Whether a registered mechanism's budget is rho (zCDP: ``--rho``, ``--target-rho``)."""
    kind = _registered(name)
    return kind is not None and kind.accounts_rho


def rho_mechanisms() -> list[str]:
    """The registered mechanisms whose budget is rho (for messages)."""
    return [name for name, kind in MECHANISMS.items() if kind.accounts_rho]


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Add a mechanism class defined outside the package (the :class:`~dpposterior.mechanisms.IntegerNoise`
    contract, docs/adding-a-mechanism.md) under its ``name``; returns the class, so it can decorate it.

    Refused in one line: a class that is not a Mechanism, a name that is not a non-empty string or that another
    class holds already, an integer law missing one of the members the contract asks for.
    """
    if not (isinstance(cls, type) and issubclass(cls, Mechanism)):
        raise InputError("mechanism", f"register takes a Mechanism subclass (got {cls!r})")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.strip() or name == Mechanism.name:
        raise InputError("mechanism", f"{cls.__name__} must set a name (the release file's string)")
    held = MECHANISMS.get(name)
    if held is not None and held is not cls:
        raise InputError("mechanism", f"{name!r} is registered already (to {held.__name__})")
    if issubclass(cls, IntegerNoise):
        missing = [m for m in ("log_kernel", "log_norm", "tail_window", "draw") if getattr(cls, m) is getattr(IntegerNoise, m)]
        if missing:
            raise InputError("mechanism", f"{cls.__name__} must define {', '.join(missing)} (the IntegerNoise contract)")
        fields = getattr(cls, "record_fields", ())
        if not isinstance(fields, tuple) or not all(isinstance(f, str) and f.isidentifier() for f in fields):
            raise InputError("mechanism", f"{cls.__name__}.record_fields must be a tuple of field names")
        taken = [f for f in fields if f in RESERVED_RECORD_FIELDS]
        if taken:
            raise InputError("mechanism", f"{cls.__name__}.record_fields: {', '.join(taken)} is a field of every "
                             f"release record (reserved: {', '.join(RESERVED_RECORD_FIELDS)})")
        add_record_fields(fields)
    MECHANISMS[name] = cls
    return cls
