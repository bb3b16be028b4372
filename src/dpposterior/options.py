"""Engine options: what the orchestrator hands every engine, and each engine's typed options.

:class:`InferenceOptions` is the run as the caller gave it (method, draws, chains, seed, the given
engine options in ``extra``, the scheduler); it sits below the engines and the orchestrator
(``dpposterior.api``), so an engine can name its options' type without importing the code that
calls it (docs/architecture.md).

:class:`EngineOptions` is the base of every engine's own options class: a frozen
dataclass whose fields are all the options the engine takes, with types, ranges and defaults
(declared with :func:`option`), documented in the engine's module and named by the family's
``EngineSpec(options=...)``.  The orchestrator (``dpposterior.api``, ``calibrate``) builds it with
``XOptions.from_inference(options, "family/method")``, which refuses, in one line naming the option and the
engine, every option the engine does not take -- ``warmup`` for engines with no warm-up and ``constrained``
for engines that do not honour it included -- and hands the engine this typed object: an engine is
``engine(model, options: XOptions)`` (``model``: the release's observation model) and never sees the untyped run.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .errors import InputError, check_seed, shown


#: the most draws (all chains together) one inference may ask for: 2e7 draws of a 10-dimensional
#: posterior are 1.6 GB of float64, beyond that requests (e.g. --draws 100000000000) exhaust memory
MAX_TOTAL_DRAWS = 20_000_000


@dataclass
class InferenceOptions:
    method: str = "auto"
    draws: int = 5000
    #: None: not given (the engine's default; engines with no warm-up refuse a given one)
    warmup: int | None = None
    chains: int = 4
    #: an int (validated); a batched calibration path (``families.EngineSpec.batch``) may instead receive
    #: the trial's ``numpy.random.SeedSequence`` child, which it hands to ``numpy.random.default_rng``
    seed: "int | np.random.SeedSequence | None" = None
    #: None: not given; only engines that honour a constraint take it (their options class has the field)
    constrained: bool | None = None
    #: the other engine options as given (analysis-file keys, keyword arguments, CLI options such as
    #: simulations); read only by :meth:`EngineOptions.from_inference`, never by an engine
    extra: dict[str, Any] = field(default_factory=dict)
    #: the run's shape options (draws, chains) the caller gave, as opposed to these defaults: an engine whose
    #: output has a fixed shape refuses a given one (:attr:`EngineOptions.takes_draws`)
    given: tuple[str, ...] = ()
    quiet: bool = True
    scheduler: str = "serial"

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def validate(self) -> "InferenceOptions":
        for name in ("draws", "chains"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InputError(name, f"must be an integer >= 1 (got {shown(value)})")
        if self.warmup is not None:
            if isinstance(self.warmup, bool) or not isinstance(self.warmup, (int, np.integer)) or self.warmup < 0:
                raise InputError("warmup", f"must be an integer >= 0 (got {shown(self.warmup)})")
            if self.warmup > MAX_TOTAL_DRAWS:
                raise InputError("warmup", f"must be at most {MAX_TOTAL_DRAWS:g} (got {self.warmup})")
        check_seed(self.seed, "seed")
        if self.constrained is not None and not isinstance(self.constrained, bool):
            raise InputError("constrained", "must be true or false")
        if self.draws * self.chains > MAX_TOTAL_DRAWS:
            raise InputError("draws", f"{self.draws} draws x {self.chains} chains is more than {MAX_TOTAL_DRAWS:g} "
                             "draws in all: the posterior would not fit in memory")
        return self


# ------------------------------------------------------------------------------ typed engine options
@dataclass(frozen=True)
class OptionSpec:
    """How one engine option is checked: its kind, range and one line of documentation."""

    kind: str  # "int", "float", "bool", "choice", "any"
    doc: str = ""
    low: float | None = None
    high: float | None = None
    #: floats: whether the bounds themselves are excluded
    open_low: bool = True
    open_high: bool = True
    choices: tuple[str, ...] = ()
    #: None is a value (e.g. "not given: the engine's own rule")
    nullable: bool = False

    def check(self, name: str, value):
        """``value`` converted to the option's type, or an InputError naming ``name``."""
        if value is None and self.nullable:
            return None
        if self.kind == "int":
            lo = int(self.low) if self.low is not None else None
            hi = int(self.high) if self.high is not None else None
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or (lo is not None and value < lo) or (hi is not None and value > hi):
                rng = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
                raise InputError(name, f"must be an integer {rng} (got {shown(value)})")
            return int(value)
        if self.kind == "float":
            lo, hi = self.low, self.high
            ok = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating)) \
                and math.isfinite(float(value))
            if ok and lo is not None:
                ok = float(value) > lo if self.open_low else float(value) >= lo
            if ok and hi is not None:
                ok = float(value) < hi if self.open_high else float(value) <= hi
            if not ok:
                if hi is None:
                    rng = f"a finite number {'>' if self.open_low else '>='} {lo:g}"
                else:
                    rng = (f"a number in {'(' if self.open_low else '['}{lo:g}, {hi:g}"
                           f"{')' if self.open_high else ']'}")
                raise InputError(name, f"must be {rng} (got {shown(value)})")
            return float(value)
        if self.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise InputError(name, f"must be true or false (got {shown(value)})")
            return bool(value)
        if self.kind == "choice":
            if not isinstance(value, str) or value.lower() not in self.choices:
                raise InputError(name, f"must be one of {', '.join(self.choices)} (got {shown(value)})")
            return value.lower()
        return value


def option(default, kind: str, doc: str = "", **spec):
    """A field of an :class:`EngineOptions` class: its default and how it is checked (:class:`OptionSpec`)."""
    return field(default=default, metadata={"spec": OptionSpec(kind, doc, **spec)})


#: options every engine takes, in the order listings show them; ``warmup`` and ``constrained`` only where
#: an engine declares them (MCMC engines; engines that honour the release's bounds)
RUN_OPTIONS = ("draws", "warmup", "chains", "seed", "constrained")


@dataclass(frozen=True)
class EngineOptions:
    """Options of an engine that draws ``draws`` x ``chains`` posterior draws from ``seed``.

    Subclass it per engine (a frozen dataclass, fields declared with :func:`option`); see
    docs/architecture.md, "How an option flows from the CLI to an engine".
    """

    #: the engine's method name, for messages when it is run outside a family (e.g. "gibbs-ss")
    engine: ClassVar[str] = "engine"

    draws: int = option(5000, "int", "posterior draws per chain", low=1)
    chains: int = option(4, "int", "chains (independent draws: only the output's shape)", low=1)
    #: an int, or a ``numpy.random.SeedSequence`` in batched calibration paths
    seed: Any = option(None, "any", "random seed (none: fresh entropy)")
    #: how the run reports and where it computes (not options of the engine's algorithm: not listed by
    #: :meth:`names`): no progress output; the scheduler an engine with Dask partitions uses
    quiet: bool = field(default=True, metadata={"run": True})
    scheduler: str = field(default="serial", metadata={"run": True})
    #: False for an engine whose output has a fixed shape (a point estimate; OPS's fixed number of samples):
    #: draws and chains are then not among its options, and a given one is refused, not ignored
    takes_draws: ClassVar[bool] = True
    #: the options that choose the observation model itself, not how it is sampled (small-area's ``likelihood``):
    #: the orchestrator builds the model with them (:meth:`model_choices`)
    model_options: ClassVar[tuple[str, ...]] = ()
    #: the values one stored draw of this engine holds (``release -> int``), where it stores fewer than the family's
    #: ``draw_values`` hook (linear regression's engines that draw no Sigma_x); None: the family's
    draw_values: ClassVar[Any] = None

    def model_choices(self) -> dict:
        """``{option: value}`` of :attr:`model_options`: what ``release.observation_model(prior, **choices)`` takes."""
        return {name: getattr(self, name) for name in self.model_options}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """All options of the engine: the run options first (draws, warmup, chains, seed, constrained)."""
        own = [f.name for f in dataclasses.fields(cls) if "run" not in f.metadata
               and (cls.takes_draws or f.name not in ("draws", "chains"))]
        return tuple([n for n in RUN_OPTIONS if n in own] + [n for n in own if n not in RUN_OPTIONS])

    @classmethod
    def specs(cls) -> dict[str, OptionSpec]:
        return {f.name: f.metadata["spec"] for f in dataclasses.fields(cls) if "spec" in f.metadata}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def refuse(cls, key: str, engine: str):
        """The one-line refusal of an option ``engine`` does not take."""
        return InputError(key, f"not an option of {engine} (options: {', '.join(cls.names())})")

    @classmethod
    def from_inference(cls, options: InferenceOptions, engine: str | None = None):
        """The engine's options from the run's ``options``; refuses (one line) any option it does not take.

        ``engine``: ``"family/method"`` for messages (default: the family-less method name).
        """
        if engine is None:
            method = getattr(options, "method", None)
            engine = method if method not in (None, "auto") else cls.engine
        own = set(cls.names())
        specs = cls.specs()
        values: dict[str, Any] = {"seed": options.seed, "quiet": bool(getattr(options, "quiet", True)),
                                  "scheduler": getattr(options, "scheduler", "serial")}
        for name in ("draws", "chains"):
            if name in own:
                values[name] = getattr(options, name)
            elif name in getattr(options, "given", ()):
                raise cls.refuse(name, engine)
        for name in ("warmup", "constrained"):
            value = getattr(options, name, None)
            if value is None:
                continue
            if name not in own:
                raise cls.refuse(name, engine)
            values[name] = specs[name].check(name, value) if name in specs else value
        for key in sorted(options.extra or {}):
            value = options.extra[key]
            if value is None:  # not given (e.g. a command-line option left out): the default
                continue
            if key in RUN_OPTIONS or key not in own:
                raise cls.refuse(key, engine)
            values[key] = specs[key].check(key, value)
        return cls(**values)

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)


@dataclass(frozen=True)
class MCMCOptions(EngineOptions):
    """Options of a Markov chain engine: a warm-up of ``warmup`` iterations per chain before its draws."""

    warmup: int = option(1000, "int", "warm-up iterations per chain", low=0)


def constrained_option(doc: str):
    """The ``constrained`` field, for the engines that honour it (and only those)."""
    return option(False, "bool", doc)


def confidential_option():
    """The ``confidential`` field: the confidential statistics of a simulated release, which exist only inside
    a simulation study (``dpposterior calibrate`` passes them to the engines that take this option)."""
    return option(None, "any", "the confidential statistics of a simulated release (calibration studies only)")
