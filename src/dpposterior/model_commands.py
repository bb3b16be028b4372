"""The command line on a user :class:`~dpposterior.Model`: ``--model FILE.py:NAME``.

* ``dpposterior infer --model FILE.py:NAME --observed V1,V2,... --out POST.nc [--method ...]``
* ``dpposterior calibrate --model FILE.py:NAME --trials T [--methods da-mcmc,smc-abc] [--out R.json]``
* ``dpposterior report POST.nc --model FILE.py:NAME --out DIR`` (the model's prior overlaid)

``NAME`` is a :class:`~dpposterior.Model` defined in ``FILE.py``, or a function of no arguments
returning one.  The file is imported as a module (it runs: load only files you trust, as with
any Python script).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np

from .errors import InputError


def load_model(spec: str, field: str = "--model"):
    """``FILE.py:NAME`` -> the :class:`~dpposterior.Model` it names."""
    from .model import Model

    if not isinstance(spec, str) or ":" not in spec:
        raise InputError(field, f"must be FILE.py:NAME (got {spec!r})")
    path_text, name = spec.rsplit(":", 1)
    path = Path(path_text)
    if not path.is_file():
        raise InputError(field, f"no such file: {path}")
    if not name.isidentifier():
        raise InputError(field, f"{name!r} is not a Python name")
    module_name = f"_dpposterior_user_model_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise InputError(field, f"cannot import {path} (a .py file is needed)")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the file
        raise InputError(field, f"importing {path} raised {type(exc).__name__}: {exc}") from None
    if not hasattr(module, name):
        raise InputError(field, f"{path} defines no {name!r}")
    obj = getattr(module, name)
    if not isinstance(obj, Model) and callable(obj):
        try:
            obj = obj()
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise InputError(field, f"{name}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, Model):
        raise InputError(field, f"{name} in {path} is a {type(obj).__name__}, not a dpposterior.Model")
    return obj


def parse_observed(text, field: str = "--observed") -> list[float]:
    if text is None:
        raise InputError(field, "give the released values, comma-separated (e.g. --observed 1137.5)")
    values = []
    for part in str(text).split(","):
        try:
            v = float(part)
        except ValueError:
            raise InputError(field, f"{part.strip()!r} is not a number") from None
        if not math.isfinite(v):
            raise InputError(field, f"{part.strip()!r} is not a finite number")
        values.append(v)
    return values


def infer_model_command(model_spec, observed, release, out, analysis=None, method=None, draws=None, warmup=None,
                        chains=None, seed=None, quiet=False, **engine_options) -> None:
    from .errors import check_output_path
    from .api import infer
    from .console import posterior_warnings_only, print_result

    if model_spec is None:
        raise InputError("--observed", "is for a user model: give --model FILE.py:NAME too")
    if release is not None:
        raise InputError("release", "give either a release file or --model, not both")
    if analysis is not None:
        raise InputError("--analysis", "not used with --model (the model carries its priors)")
    check_output_path(out, "--out")
    model = load_model(model_spec)
    values = parse_observed(observed)
    kwargs = {k: v for k, v in (("draws", draws), ("warmup", warmup), ("chains", chains), ("seed", seed))
              if v is not None}
    kwargs.update({k: v for k, v in engine_options.items() if v is not None})
    with posterior_warnings_only():
        post = infer(model, observed=values, method=method or "auto", quiet=quiet, **kwargs)
    post.to_netcdf(out)
    print_result(post, out)


def calibrate_model_command(model_spec, trials, methods=None, seed=0, draws=None, out=None, plot=None,
                            quiet=False) -> dict:
    from .diagnostics.calibration import emit_study
    from .diagnostics.model_calibration import calibrate_model
    from .errors import check_output_path

    for path, name in ((out, "--out"), (plot, "--plot")):
        if path is not None:
            check_output_path(Path(path), name)
    model = load_model(model_spec)
    result = calibrate_model(model, trials, methods, seed=seed, draws=draws, return_ranks=True, progress=not quiet)
    emit_study(result, result.pop("_ranks"), out, plot, quiet)
    return result


def report_model_command(posterior, out, compare, model_spec) -> Path:
    """``report POSTERIOR --model FILE.py:NAME``: the inputs must belong together (the posterior, or the
    calibration result, is of this model) before anything is written; a posterior gets the model's
    prior overlaid (``prior.nc`` in the output folder), a calibration result is reported as it is."""
    from .report import _attrs, _existing, load_calibration, load_posterior, write_report

    model = load_model(model_spec)
    path = _existing(posterior, "posterior")
    if path.suffix.lower() == ".json":
        result = load_calibration(path)
        _require_same_model(result.get("model"), model, path, "calibration result")
        return write_report(path, out, compare=list(compare or []))
    from .arviz_compat import close

    idata = load_posterior(path)
    try:
        _require_same_model(_attrs(idata).get("model"), model, path, "posterior")
        missing = [name for name in model.names if name not in idata.posterior.data_vars]
    finally:
        close(idata)
    if missing:
        raise InputError("--model", f"{path} has no parameter {missing[0]!r} of model {model.name!r}: it is a "
                         "posterior of another model")
    prior = prior_posterior_file(model, out)
    try:
        return write_report(path, out, compare=[*(compare or []), prior])
    except BaseException:
        prior.unlink(missing_ok=True)  # a failed report leaves nothing of ours behind
        raise


def _require_same_model(stated, model, path, what: str) -> None:
    if stated is None:
        raise InputError("--model", f"{path} is not a {what} of a dpposterior.Model (it names no model); "
                         "--model overlays the prior of the model a posterior came from")
    if str(stated) != model.name:
        raise InputError("--model", f"{path} is a {what} of model {str(stated)!r}, not of {model.name!r}")


def prior_posterior_file(model_spec, out_dir, draws: int = 4000) -> Path:
    """The model's prior as a posterior-shaped netCDF (for ``report --model``: prior beside posterior)."""
    from .model import Model
    from .posterior import Posterior

    model = model_spec if isinstance(model_spec, Model) else load_model(model_spec)
    values = model.sample_prior(draws, np.random.default_rng(0))
    variables, dims, coords = model.posterior_variables(values)
    post = Posterior(family=model.name, method="prior", iid=True, posterior={k: v[None] for k, v in variables.items()},
                     dims=dims, coords=coords, attrs={"model": model.name})
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "prior.nc"
    post.to_netcdf(path)
    return path
