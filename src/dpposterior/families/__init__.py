"""Data models ("families"): one module each, registered here by name.

A family module exposes ``FAMILY``, a :class:`Family` describing

* ``release_model`` -- the pydantic model of its release file (``release.py``),
* ``methods``       -- inference engines by name, each an :class:`EngineSpec` (the engine, its
  options class and its optional batched calibration path, as ``"module:name"`` strings resolved
  only when called, so a family never imports an engine; docs/architecture.md) -- the family's one
  method table, record-level ``da-mcmc`` included,
* ``auto_method``   -- what ``method="auto"`` picks,
* ``parse_prior``   -- prior from a dict (TOML ``[prior]`` table) or a prior object,
* ``curate``        -- the curator: data frame + options -> release dict, declared with its typed
  options class (``@curator(XCuratorOptions)``, ``families/_curate.py``; :attr:`Family.curator_options`),
* ``simulate``      -- for ``dpposterior calibrate``: ``simulate(prior, n, epsilon, rng)``
  draws theta from the prior, data from the model, and a release through the
  mechanism; returns a :class:`SimulatedRelease`; a family listing ``simulate_mechanisms``
  also takes ``simulate(prior, n, epsilon, rng, mechanism=NAME, rho=RHO)`` (``epsilon`` None
  for the discrete Gaussian, whose budget is ``rho``),
* ``mechanisms``    -- the registered mechanisms (``mechanisms.registry``) its releases may use,
* ``hooks``         -- named optional extras (e.g. the simulator model of the SBI families).

Engines are called as ``engine(model, options) -> Posterior``: the release's observation model (``observation_model``
hook, built by ``release.observation_model(prior, **options.model_choices())``) and their own typed options.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import InputError

#: family name -> module defining FAMILY (modules are imported on first use)
FAMILY_MODULES: dict[str, str] = {
    "gaussian": "dpposterior.families.gaussian",
    "binomial": "dpposterior.families.binomial",
    "multinomial": "dpposterior.families.multinomial",
    "exponential": "dpposterior.families.exponential",
    "poisson": "dpposterior.families.poisson",
    "naive-bayes": "dpposterior.families.naive_bayes",
    "linear-regression": "dpposterior.families.linear_regression",
    "linreg-ju": "dpposterior.families.linreg_ju",
    "sir": "dpposterior.families.sir",
    "loglinear": "dpposterior.families.loglinear",
    "small-area": "dpposterior.families.small_area",
    "marginals": "dpposterior.families.marginals",
    "census": "dpposterior.families.census",
}


@dataclass(frozen=True)
class Competence:
    """What an engine says about one release: whether it can analyse it exactly and affordably (``ok``), its
    estimated work (``cost``, in the engine's own unit) and, when not, why (``reason``)."""

    ok: bool
    cost: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class EngineSpec:
    """How a family names one engine, by ``"module:name"`` strings resolved on first use.

    ``run``: ``engine(model, options) -> Posterior`` (``model``: the release's
    :class:`~dpposterior.observation.ObservationModel`, holding the release and the parsed prior).  ``options``:
    the engine's options class (a subclass of :class:`dpposterior.options.EngineOptions`): every option the engine
    takes, with types, ranges and defaults; the orchestrator builds it before any work and refuses any other
    option (docs/architecture.md).  ``batch`` (optional): the engine's
    vectorised calibration path, ``batch(sims, prior, method, options) -> array (trials, draws, d)`` of the
    unconstrained theta of every simulated release at once (``options``: the method's typed options, built
    as ``infer`` builds them; ``options.seed`` may be a ``numpy.random.SeedSequence``), or None where it
    cannot batch these releases; ``dpposterior calibrate`` then runs ``run`` one release at a time.
    """

    run: str
    options: str
    batch: str | None = None
    #: optional ``"module:function"``: ``competence(model) -> Competence`` (``model``: the release's observation model,
    #: built with the family's default prior), asked by ``auto`` (``Family.auto_order``)
    competence: str | None = None

    @classmethod
    def of(cls, module: str, run: str, options: str, batch: str | None = None,
           competence: str | None = None) -> "EngineSpec":
        """``EngineSpec.of("dpposterior.inference.m", "engine", "EngineOptions")``: run and options in one module."""
        return cls(f"{module}:{run}", f"{module}:{options}", batch,
                   f"{module}:{competence}" if competence else None)


#: data-augmentation MCMC (Ju, Awan, Gong & Rao 2022) on a family's record model (its ``da_model`` hook)
DA_MCMC = EngineSpec.of("dpposterior.inference.da_mcmc", "da_mcmc", "DaMcmcOptions")


def resolve(target: str) -> Any:
    """``"module:name"`` -> the function or class (imports the module)."""
    module_name, func_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # an optional package missing (or blocked: sys.modules["torch"] = None)
        missing = getattr(exc, "name", None) or ""
        if not missing or missing.startswith("dpposterior"):
            raise
        top = missing.split(".")[0]
        extra = " (pip install 'dpposterior[flows]')" if top in ("torch", "zuko") else ""
        raise InputError("method", f"this engine ({module_name.rsplit('.', 1)[-1]}) needs the optional package "
                         f"{top!r}, which cannot be imported{extra}") from None
    return getattr(module, func_name)


@dataclass
class SimulatedRelease:
    """One simulated dataset's truth and release (for calibration studies)."""

    #: true parameter values keyed by the posterior variable names (e.g. {"p": 0.3})
    theta: dict[str, Any]
    release: Any
    #: confidential statistics, for the ``non-private`` method inside simulations only
    confidential: dict[str, Any] = field(default_factory=dict)


@dataclass
class Family:
    name: str
    release_model: type
    methods: dict[str, "str | EngineSpec"]
    auto_method: str
    parse_prior: Callable[[Any, Any], Any]
    curate: Callable[..., dict] | None = None
    #: method shown beside the main summary by ``dpposterior infer`` (noise-ignoring)
    naive_method: str | None = "naive"
    #: whether ``dpposterior infer`` computes the naive posterior unless told ``--no-naive``: off where it
    #: is expensive (the SBI families' naive NPE trains a flow; ``--naive`` turns it on)
    naive_by_default: bool = True
    description: str = ""
    simulate: Callable[..., "SimulatedRelease"] | None = None
    hooks: dict[str, Callable] = field(default_factory=dict)
    #: the mechanisms (names in ``mechanisms.registry.MECHANISMS``) its releases may use; its release
    #: model refuses the others, and tests/test_mechanisms.py checks the two agree
    mechanisms: tuple[str, ...] = ("laplace",)
    #: the mechanisms ``simulate`` can release through when asked (``simulate(..., mechanism=NAME, rho=RHO)``;
    #: ``dpposterior calibrate --mechanism``), the simulator's own first (released at ``epsilon``); empty: only
    #: the family's own simulated mechanism
    simulate_mechanisms: tuple[str, ...] = ()
    #: whether ``simulate`` also releases through any other registered integer, additive, symmetric noise law
    #: (drawn by the law's own sampler at the budget its ``noise_for_budget`` states)
    simulates_integer_noise: bool = False
    #: optional: ``auto_rule(release) -> method``, what ``auto`` picks for this release (e.g. the exact count
    #: engine for integer noise); ``auto_method`` is used without a release (calibration, listings)
    auto_rule: Callable[[Any], str] | None = None
    #: optional: the methods ``auto`` tries for a release, in order of preference; the first whose engine declares
    #: itself competent (``EngineSpec.competence``; an engine that declares nothing is competent) is chosen, else
    #: ``auto_rule`` / ``auto_method``
    auto_order: tuple[str, ...] = ()
    #: whether its engines can restrict the parameters to what the release's bounds allow (the analysis file's
    #: ``constrained``); for the others the words "constrained"/"unconstrained" do not apply
    constrainable: bool = False

    def __post_init__(self):
        if self.curate is not None and self.curator_options is None:
            raise TypeError(f"family {self.name!r}: declare the curator with its typed options class, "
                            "@curator(XCuratorOptions) (families/_curate.py)")
        for method, spec in self.methods.items():
            if not isinstance(spec, EngineSpec):
                raise TypeError(f"family {self.name!r}: method {method!r} must be an EngineSpec(run=, options=), "
                                f"not {spec!r}")

    @property
    def areal(self) -> bool:
        """Whether its releases are tables over areas (its release model has ``areas``): ``report`` draws the
        per-area variables as caterpillars and maps, and weighs a rerun of its sampler by areas x cells."""
        return "areas" in getattr(self.release_model, "model_fields", {})

    @property
    def curator_options(self) -> type | None:
        """The curator's typed options class (a ``families._curate.CuratorOptions`` subclass): every option
        ``curate`` takes."""
        return getattr(self.curate, "curator_options", None)

    def spec(self, method: str, field_name: str = "method", release=None) -> EngineSpec:
        """The :class:`EngineSpec` that ``method`` (``auto`` resolved for ``release``) names."""
        if method == "auto":
            method = self.resolve_method(method, release)
        if method not in self.methods:
            known = ", ".join(sorted([*self.methods, "auto"]))
            raise InputError(field_name, f"unknown method {method!r} for family {self.name!r} (one of: {known})")
        return self.methods[method]

    def engine(self, method: str, field_name: str = "method", release=None) -> Callable:
        return resolve(self.spec(method, field_name, release).run)

    def engine_options(self, method: str, release=None) -> type:
        """The options class (:class:`dpposterior.options.EngineOptions`) of ``method``'s engine."""
        return resolve(self.spec(method, release=release).options)

    def batch_path(self, method: str) -> Callable | None:
        """The engine's batched calibration path for ``method`` (see :class:`EngineSpec`), or None."""
        spec = self.methods.get(self.resolve_method(method))
        if spec is None or spec.batch is None:
            return None
        return resolve(spec.batch)

    @property
    def has_batch_paths(self) -> bool:
        """Whether any of the family's engines has a batched calibration path."""
        return any(spec.batch for spec in self.methods.values())

    def resolve_method(self, method: str, release=None, given=()) -> str:
        """``method``, or for ``auto`` the method this release gets: the first of ``auto_order`` whose engine is
        competent (and takes every option named in ``given``), else ``auto_rule``'s, else ``auto_method``."""
        if method != "auto":
            return method
        if release is not None:
            model = None
            for candidate in self.auto_order:
                spec = self.methods[candidate]
                if given and not set(given) <= set(resolve(spec.options).names()):
                    continue
                if spec.competence is None:
                    return candidate
                model = model if model is not None else release.observation_model(None)
                if resolve(spec.competence)(model).ok:
                    return candidate
        if release is not None and self.auto_rule is not None:
            return self.auto_rule(release)
        return self.auto_method

    def competence(self, method: str, release) -> Competence:
        """What ``method``'s engine says about ``release``'s observation model (competent when it declares nothing)."""
        spec = self.spec(method, release=release)
        if spec.competence is None:
            return Competence(True)
        return resolve(spec.competence)(release.observation_model(None))


def available_families() -> list[str]:
    out = []
    for name, module in FAMILY_MODULES.items():
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        out.append(name)
    return out


def get_family(name, field: str = "family") -> Family:
    if not isinstance(name, str) or name not in FAMILY_MODULES:
        known = ", ".join(available_families())
        raise InputError(field, f"unknown family {name!r} (one of: {known})")
    module_name = FAMILY_MODULES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise InputError(field, f"family {name!r} is not implemented yet") from None
        raise
    return module.FAMILY
