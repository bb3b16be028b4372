"""What was released, as one object: measurements of a latent statistic, and the observation model around them.

A DP release is a list of **measurements**.  Each is the released values, the **query** that maps the latent
(confidential) statistic to the quantity the noise was added to, and the **mechanism instance** that added it
(Ju, Awan, Gong & Rao 2022, Sec. 2: the release y ~ eta(. | s(x)) with s a statistic of the confidential data x).
The **latent statistic** is what the data model says about the confidential data, and it advertises what it can
do for an engine -- records to resample (data augmentation), exact enumeration of its law, moments (a CLT
likelihood), simulation.  An **observation model** is the named variables of the posterior (names, dims, coords,
transforms), their prior, the latent statistic and the measurements.

Engines declare the capabilities they need (:attr:`Engine competence <ObservationModel.competent>`), and one
packer (:meth:`ObservationModel.pack`) names every engine's draws from the model's variables.

Imports: numpy and the mechanisms only (the schema layer, beside ``release`` and ``model``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from .errors import InputError
from .mechanisms.base import Mechanism

#: what a latent statistic may offer an engine
RECORDS = "records"        # confidential records that a Gibbs step can move one at a time (data augmentation)
ENUMERATE = "enumerate"    # its law can be enumerated exactly (small supports)
MOMENTS = "moments"        # mean and covariance of the released quantity given the parameters (CLT likelihood)
SIMULATE = "simulate"      # draws of the statistic given the parameters (SBC, posterior predictive, ABC)
CAPABILITIES = (RECORDS, ENUMERATE, MOMENTS, SIMULATE)


class Query(Protocol):
    """Maps the latent statistic to the exact quantity a mechanism perturbed (e.g. a marginal count table)."""

    #: shape of its output (the released values' shape)
    shape: tuple[int, ...]

    def __call__(self, latent: Any) -> np.ndarray: ...


@dataclass(frozen=True)
class Measurement:
    """One released quantity: ``values`` = ``mechanism``(``query``(latent statistic))."""

    name: str
    values: np.ndarray
    query: Any
    mechanism: Mechanism

    def __post_init__(self):
        shape = tuple(getattr(self.query, "shape", np.shape(self.values)))
        if tuple(np.shape(self.values)) != shape:
            raise InputError(self.name, f"released values have shape {np.shape(self.values)}, its query gives {shape}")

    def log_likelihood(self, statistic) -> float:
        """log eta(values | statistic), summed over the released cells."""
        return float(np.sum(self.mechanism.logpdf(self.values, statistic)))

    @property
    def integer_noise(self) -> bool:
        return bool(self.mechanism.integer_valued)

    def residual_log_mass(self, lo: int, hi: int) -> np.ndarray:
        """log eta(y - s = k) for the integers k = lo..hi (integer noise): the table a compiled sweep looks up."""
        if not self.integer_noise:
            raise InputError(self.name, f"mechanism {self.mechanism.name!r} is not integer noise: no residual table")
        return np.asarray(self.mechanism.logpmf(np.arange(lo, hi + 1, dtype=float)), float)


@dataclass(frozen=True)
class Variable:
    """A posterior variable: its name, the names of its event dims, their labels, and its support
    (``"simplex"`` over all its event axes, ``"real"``, ``"positive"``, ``"unit"``, ``"count"``: whole numbers >= 0)."""

    name: str
    dims: tuple[str, ...] = ()
    coords: dict = field(default_factory=dict)
    support: str = "real"

    @classmethod
    def from_draw(cls, name: str, values, lead: int, dims: dict, coords: dict, support: str = "real") -> "Variable":
        """The variable of ``values``, one draw as a model's ``posterior_variables`` gives it (``lead`` leading
        axes before its event axes), dimensioned by ``dims`` (else ArviZ's ``{name}_dim_{k}``) and labelled by
        ``coords`` where they name its dims."""
        names = tuple(dims.get(name, [f"{name}_dim_{k}" for k in range(np.ndim(values) - lead)]))
        return cls(name, names, {d: list(coords[d]) for d in names if d in coords}, support)


@dataclass(frozen=True)
class LatentStatistic:
    """The latent statistic of a data model and what it can do.  ``capabilities``: a subset of
    :data:`CAPABILITIES`; ``describe``: one line for messages; ``state``: what the engines that use it need
    (e.g. the junction tree of a table's model), opaque here."""

    describe: str
    capabilities: frozenset
    state: Any = None

    def __post_init__(self):
        unknown = set(self.capabilities) - set(CAPABILITIES)
        if unknown:
            raise ValueError(f"unknown capabilities {sorted(unknown)} (known: {', '.join(CAPABILITIES)})")


@dataclass(frozen=True)
class Prior:
    """A prior over the model's variables: ``sample(rng) -> {name: value}`` (one draw), optional
    ``log_density(values)``, and the parameters that define it (recorded in posterior files)."""

    sample: Callable[[np.random.Generator], dict]
    parameters: dict = field(default_factory=dict)
    log_density: Callable[[dict], float] | None = None
    describe: str = ""
    #: the family's parsed prior object (a ``BetaPrior``, a ``SmallAreaPrior``, ...): the hyperparameters that
    #: conjugate updates and hierarchical samplers read by name
    spec: Any = None


@dataclass(frozen=True)
class ObservationModel:
    """Variables, prior, latent statistic and measurements: everything an engine needs to know about a release."""

    family: str
    variables: tuple[Variable, ...]
    prior: Prior
    latent: LatentStatistic
    measurements: tuple[Measurement, ...]
    #: the number of confidential records when public (None: unknown)
    n: int | None = None
    attrs: dict = field(default_factory=dict)
    #: variables of the posterior predictive (new data given the parameters, e.g. a new record)
    predictive: tuple[Variable, ...] = ()
    #: the loaded release file the model was built from: the measurements are views of its tables, and an engine
    #: whose sampler is compiled over the file's own layout (a small-area table, a census histogram) reads them here
    release: Any = None

    def competent(self, needs, engine: str = "engine") -> None:
        """Refuse, in one line, an engine that needs a capability the latent statistic lacks, or integer
        noise where a measurement has continuous noise (``needs``: capabilities and optionally "integer-noise")."""
        needs = set(needs)
        missing = (needs - {"integer-noise"}) - set(self.latent.capabilities)
        if missing:
            raise InputError("method", f"{engine} needs {', '.join(sorted(missing))} of the latent statistic, which "
                             f"{self.latent.describe} does not offer")
        if "integer-noise" in needs:
            bad = [m.name for m in self.measurements if not m.integer_noise]
            if bad:
                raise InputError("method", f"{engine} needs integer noise; {bad[0]} has continuous noise")

    def is_competent(self, needs) -> bool:
        try:
            self.competent(needs)
        except InputError:
            return False
        return True

    def log_likelihood(self, statistics: dict) -> float:
        """Sum of the measurements' log-likelihoods given each measurement's statistic (``name -> array``)."""
        return float(sum(m.log_likelihood(statistics[m.name]) for m in self.measurements))

    def variable(self, name: str) -> Variable:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    def marginal(self, names) -> "ObservationModel":
        """The model with only the variables ``names`` (in the model's order): what an engine that draws some of
        them packs on (a point estimate's coefficients alone, a rate table too large to keep left out)."""
        keep = set(names)
        unknown = keep - {v.name for v in self.variables}
        if unknown:
            raise KeyError(f"not variables of the model: {sorted(unknown)}")
        return dataclasses.replace(self, variables=tuple(v for v in self.variables if v.name in keep))

    def pack(self, draws: dict[str, np.ndarray], method: str, *, posterior_predictive: dict | None = None,
             sample_stats: dict | None = None, sample_stats_dims: dict | None = None, attrs: dict | None = None,
             iid: bool = False, float32: bool | tuple = False, extras: dict | None = None):
        """The :class:`~dpposterior.posterior.Posterior` of an engine's draws (``name -> (chain, draw, *event)``),
        named, dimensioned and labelled from the model's variables (and ``posterior_predictive`` from its
        predictive variables); a draw of a variable the model does not have, or a missing one, or a wrong event
        shape, is a programming error (ValueError).  Predictive draws are one group: an engine that draws none
        of them (e.g. ``da-mcmc``, which moves parameters and records only) gives none, and the posterior has
        no predictive group; a partial set is an error.  ``sample_stats_dims``: the event dims of sample statistics
        that have event axes (``name -> dims``; labelled by the variables' coords of the same dims); ``extras``:
        what the engine keeps in Python only (e.g. a trained flow); ``float32``: store every variable as float32
        (True), or those named (a tuple)."""
        from .posterior import Posterior

        names = [v.name for v in self.variables]
        predictive = dict(posterior_predictive or {})
        # the predictive variables as a group: all drawn, or none (not every engine draws new data)
        predictive_variables = self.predictive if predictive else ()
        dims, coords = {}, {}
        for group, variables, given in (("draws", self.variables, draws),
                                        ("posterior_predictive", predictive_variables, predictive)):
            extra = set(given) - {v.name for v in variables}
            missing = {v.name for v in variables} - set(given)
            if extra or missing:
                raise ValueError(f"{group} do not match the model's variables (extra {sorted(extra)}, "
                                 f"missing {sorted(missing)})")
            for v in variables:
                arr = np.asarray(given[v.name])
                if arr.ndim != 2 + len(v.dims):
                    raise ValueError(f"{v.name}: draws have {arr.ndim - 2} event axes, the variable {len(v.dims)}")
                if v.dims:
                    dims[v.name] = list(v.dims)
                for d, labels in v.coords.items():
                    coords.setdefault(d, list(labels))
        stats = dict(sample_stats or {})
        for stat, stat_dims in (sample_stats_dims or {}).items():
            if stat not in stats:
                raise ValueError(f"sample_stats_dims names {stat!r}, which is not a sample statistic")
            if np.ndim(stats[stat]) != 2 + len(stat_dims):
                raise ValueError(f"{stat}: the sample statistic has {np.ndim(stats[stat]) - 2} event axes, its dims "
                                 f"{len(stat_dims)}")
            dims[stat] = list(stat_dims)
        post = Posterior(family=self.family, method=method, posterior={k: np.asarray(draws[k]) for k in names},
                         dims=dims, coords=coords,
                         posterior_predictive={v.name: np.asarray(predictive[v.name]) for v in predictive_variables},
                         sample_stats=stats, attrs={**self.attrs, **(attrs or {})}, iid=iid,
                         float32_variables=(tuple(float32) if isinstance(float32, tuple)
                                            else tuple(names) if float32 else ()), extras=dict(extras or {}))
        return post



class TableLaws:
    """The noise of a released table whose many cells share a few laws: the distinct mechanisms and each cell's
    index into them, found on first use by ``laws()`` -> (mechanisms, index) and kept -- a handful of mechanism
    objects and one index array whatever the number of cells (a measurement's ``mechanism``).  ``field`` and
    ``cells`` name the table and its cells in a refusal."""

    def __init__(self, name: str, laws: Callable[[], tuple], field: str, cells: str = "cells"):
        self.name = name
        self._find = laws
        self._laws = None
        self.field = field
        self.cells = cells

    def laws(self) -> tuple[list, np.ndarray]:
        if self._laws is None:
            self._laws = self._find()
        return self._laws

    @property
    def integer_valued(self) -> bool:
        return all(m.integer_valued for m in self.laws()[0])

    def logpdf(self, y, s) -> np.ndarray:
        """log eta(y | s) per cell, each cell under its own law (one vectorised call per law)."""
        laws, index = self.laws()
        y, s = np.broadcast_arrays(np.asarray(y, float), np.asarray(s, float))
        out = np.empty(y.shape)
        for k, law in enumerate(laws):
            at = index == k
            out[at] = law.logpdf(y[at], s[at])
        return out

    def logpmf(self, k) -> np.ndarray:
        """log eta(y - s = k), where one law covers every cell (the residual table of a compiled sweep)."""
        laws, _ = self.laws()
        if len(laws) != 1:
            raise InputError(self.field, f"the {self.cells} have different noise laws: no single residual table")
        return laws[0].logpmf(k)
