"""Typed engine options: every family x engine, driven by the registry.

* every ``EngineSpec`` string resolves (engine, options class, batched path), for every family in
  ``FAMILY_MODULES`` and for the user ``Model``'s method table, so a typo fails here, not when a user
  calls that method;
* every option given to an engine that does not take it is refused in one line naming the option and
  the engine, before any work (parametrised over family x engine x option);
* ``constrained`` is recorded only where the engine applied it;
* the table in docs/cli.md ("Engine options") is the option classes' own listing;
* engines read their options only from their options class (no ``options.extra`` in engine modules).
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import dpposterior as dp
from dpposterior.errors import InputError
from dpposterior.families import FAMILY_MODULES, EngineSpec, get_family, resolve
from dpposterior.model import MODEL_METHODS
from dpposterior.observation import ObservationModel
from dpposterior.options import EngineOptions, InferenceOptions

from _doc_tables import check_table, rewrite_table
from _examples import example

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAIRS = [(name, method) for name in FAMILY_MODULES for method in get_family(name).methods]


def _options_class(family: str, method: str):
    return get_family(family).engine_options(method)


#: every option name any engine takes, plus a name no engine takes
ALL_OPTIONS = sorted({n for f, m in PAIRS for n in _options_class(f, m).names()} | {"no_such_option"})


@pytest.mark.parametrize("family,method", PAIRS)
def test_every_engine_spec_resolves(family, method):
    spec = get_family(family).methods[method]
    assert isinstance(spec, EngineSpec)
    assert callable(resolve(spec.run))
    cls = resolve(spec.options)
    assert isinstance(cls, type) and issubclass(cls, EngineOptions)
    assert "seed" in cls.names()
    # draws and chains: options of every engine but those whose output has a fixed shape (and only those)
    assert ({"draws", "chains"} <= set(cls.names())) == cls.takes_draws
    if spec.batch is not None:
        assert callable(resolve(spec.batch))
    cls()  # its defaults are valid options


@pytest.mark.parametrize("method", sorted(MODEL_METHODS))
def test_model_methods_resolve(method):
    spec = MODEL_METHODS[method]
    assert callable(resolve(spec.run)) and issubclass(resolve(spec.options), EngineOptions)


def _release(family: str):
    return example(family).release


@pytest.mark.parametrize("option", ALL_OPTIONS)
@pytest.mark.parametrize("family,method", PAIRS)
def test_option_not_taken_is_refused(family, method, option):
    cls = _options_class(family, method)
    if option in cls.names():
        return  # taken: its values are checked by the class (tests below and per engine)
    value = True if option == "constrained" else 1
    with pytest.raises(InputError) as err:
        dp.infer(_release(family), method=method, seed=1, **{option: value})
    message = str(err.value)
    assert message.startswith(f"{option}: not an option of {family}/{method} (options: ")
    assert "\n" not in message
    assert message.endswith(f"{', '.join(cls.names())})")


def test_refusal_reads_as_the_issue_states():
    with pytest.raises(InputError, match=r"^grid_size: not an option of gaussian/naive \(options: draws, chains, "
                                         r"seed, constrained\)$"):
        dp.infer(_release("gaussian"), method="naive", grid_size=7)


def test_option_values_are_checked_by_their_class():
    for kwargs, field in ((dict(method="grid", grid_size=7), "grid_size"),
                          (dict(method="gibbs", joint_update="yes"), "joint_update"),
                          (dict(method="da-mcmc", thin=0), "thin"),
                          (dict(method="gibbs", warmup=-1), "warmup")):
        with pytest.raises(InputError, match=f"^{field}: must be"):
            dp.infer(_release("gaussian"), seed=1, **kwargs)


def test_constrained_recorded_only_where_applied():
    gaussian = dp.infer(_release("gaussian"), method="naive", constrained=True, seed=1, draws=50, chains=1)
    assert gaussian.attrs["constrained"] in (True, 1)
    binomial = dp.infer(_release("binomial"), method="naive", seed=1, draws=50, chains=1)
    assert "constrained" not in binomial.attrs
    assert "options_warmup" not in binomial.attrs  # no warm-up in independent draws


def test_options_are_typed_before_the_engine_runs(monkeypatch):
    """The orchestrator builds the engine's typed options (refusing what it does not take); the engine receives
    that object, never the untyped run, beside the release's observation model."""
    import dpposterior.inference.gibbs_ss as module

    fam = get_family("binomial")
    cls = fam.engine_options("gibbs-ss")
    run = InferenceOptions(method="gibbs-ss", draws=10, chains=1, seed=1, extra={"tail_mass": 1e-9})
    with pytest.raises(InputError, match="^tail_mass: not an option of binomial/gibbs-ss"):
        cls.from_inference(run, "binomial/gibbs-ss")
    seen = {}
    engine = module.gibbs_ss

    def spy(model, options):
        seen["model"], seen["options"] = model, options
        return engine(model, options)

    monkeypatch.setattr(module, "gibbs_ss", spy)
    dp.infer(_release("binomial"), method="gibbs-ss", draws=10, chains=1, warmup=10, seed=1)
    assert isinstance(seen["options"], cls) and seen["options"].draws == 10 and seen["options"].warmup == 10
    model = seen["model"]
    assert isinstance(model, ObservationModel) and model.family == "binomial" and model.release.family == "binomial"
    assert [v.name for v in model.variables] == ["p"] and model.prior.spec == fam.parse_prior(None, model.release)


def options_table() -> str:
    """The markdown table of docs/cli.md, "Engine options": family | engine | options."""
    rows = ["| family | engine | options |", "|---|---|---|"]
    for family, method in PAIRS:
        names = ", ".join(f"`{n}`" for n in _options_class(family, method).names())
        rows.append(f"| {family} | `{method}` | {names} |")
    return "\n".join(rows)


def test_cli_doc_table_lists_every_engines_options():
    check_table("engine-options", options_table(), "tests/test_engine_options.py")


def test_model_without_privacy_cost_refused_before_any_work():
    from dpposterior.mechanisms import Gaussian

    from scipy import stats

    model = dp.Model(params={"mu": stats.norm(0, 1)},
                     records=lambda th, size, rng: rng.normal(th["mu"], 1.0, size),
                     statistic=lambda x: np.clip(x, -3, 3), mechanism=Gaussian(sigma=0.5), n=20,
                     record_logpdf=lambda x, th: -0.5 * (x - th["mu"]) ** 2, clamp=(-3, 3))
    with pytest.raises(InputError, match=r"^model\.mechanism: .*no privacy cost") as err:
        dp.infer(model, observed=[0.3], draws=10, chains=1, seed=1)
    assert "\n" not in str(err.value)


if __name__ == "__main__":  # rewrite the table in docs/cli.md
    rewrite_table("engine-options", options_table())


def test_calibrate_refuses_draws_for_an_engine_without_them():
    """calibrate builds engine options itself: a --draws that no method of the study takes (adassp, ops) is
    refused up front; beside methods that take it, the JSON lists where it did not apply."""
    from dpposterior.diagnostics.calibration import calibrate
    from dpposterior.errors import InputError

    for family, method in (("linear-regression", "adassp"), ("binomial", "ops")):
        with pytest.raises(InputError, match=f"draws: not an option of {family}/{method}"):
            calibrate(family, 50, 1.0, 3, [method], draws=100)
    res = calibrate("binomial", 50, 1.0, 3, ["naive", "ops"], draws=100)
    assert res["draws"] == 100 and res["draws_fixed_by_engine"] == ["ops"]
