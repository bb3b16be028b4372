"""The analysis file (TOML): method, constraints, prior, sampling settings.

    method = "auto"
    constrained = true
    [prior]
    kind = "normal-inverse-gamma"
    mu0 = 12.5
    [sampling]
    draws = 5000
    warmup = 1000
    chains = 4
    seed = 1

Top-level keys beyond these are engine options (e.g. ``sigma2_fixed`` for linear
regression's ``bayes-fixeds-fast``): ``infer`` checks them against the options class of the
engine that runs and refuses, in one line, any it does not take.  See ``docs/analysis-format.md``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from .errors import InputError

SAMPLING_KEYS = {"draws", "warmup", "chains", "seed"}
TOP_KEYS = {"method", "constrained", "prior", "sampling"}


def load_analysis(path, family=None) -> dict:
    """Read and validate an analysis TOML file; returns keyword arguments for ``infer``."""
    from .errors import check_input_file

    path = Path(path)
    check_input_file(path, "analysis")
    try:
        data = tomllib.loads(path.read_text())
    except UnicodeDecodeError:
        raise InputError("analysis", f"{path} is not a text (UTF-8) file") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError("analysis", f"invalid TOML ({exc})") from None
    return parse_analysis(data, family)


def parse_analysis(data: dict, family=None) -> dict:
    """Keyword arguments for ``infer``; engine options pass through (the engine's options class checks them)."""
    out: dict = {}
    for key, value in data.items():
        if key == "method":
            if not isinstance(value, str):
                raise InputError("analysis.method", "must be a string")
            out["method"] = value
        elif key == "constrained":
            if not isinstance(value, bool):
                raise InputError("analysis.constrained", "must be true or false")
            out["constrained"] = value
        elif key == "prior":
            if not isinstance(value, dict):
                raise InputError("analysis.prior", "must be a table")
            out["prior"] = value
        elif key == "sampling":
            if not isinstance(value, dict):
                raise InputError("analysis.sampling", "must be a table")
            for skey, svalue in value.items():
                if skey not in SAMPLING_KEYS:
                    raise InputError(f"analysis.sampling.{skey}", "unknown key (draws, warmup, chains, seed)")
                out[skey] = svalue
        elif key in SAMPLING_KEYS:  # a run option given at the top level would be lost under the CLI's own
            raise InputError(f"analysis.{key}", "belongs in the [sampling] table (draws, warmup, chains, seed)")
        elif family is not None:  # an engine option: infer refuses it unless the engine that runs takes it
            out[key] = value
        else:  # no family, so no engine to take it
            raise InputError(f"analysis.{key}", "unknown key")
    return out
