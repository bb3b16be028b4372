"""The curator in Python: what ``dpposterior release`` does, as functions.

* :func:`release_from_csv` -- confidential records (a CSV file or a pandas DataFrame) -> a release: the
  options of ``dpposterior release`` as keywords, built by :func:`dpposterior.curator.build_release`
  (the same checks, the same noise, the same accounting);
* :func:`release_from_measurements` -- a long-format table of noisy measurements (small-area) -> a release,
  with no noise added: the measurements are already noisy, and the privacy statement is what their
  stated noise gives (``dpposterior release --from-measurements``).

Both return the loaded release (:class:`dpposterior.release.ReleaseBase`) and write it when ``out`` is given.
"""

from __future__ import annotations

from pathlib import Path

from .errors import InputError

#: keywords that hold a comma-separated list on the command line (``--columns Y,X1``): a string is split
_LIST_OPTIONS = ("columns", "features")
#: keywords whose value the CLI reads from a public file: a path here is read the same way
_FILE_OPTIONS = {"exposure": "exposure", "areas": "area", "cells": "cell"}


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _curate_keywords(options: dict) -> dict:
    """The keywords as ``dpposterior release`` would pass its flags: lists split, bounds a tuple, public files
    read, and the values every curator has by default (``parties=1``, no ``intercept``, no ``drop_missing``)
    treated as not given."""
    from .curator import read_exposure, read_public_list

    out = dict(options)
    for key in _LIST_OPTIONS:
        if isinstance(out.get(key), str):
            out[key] = _split(out[key])
    if isinstance(out.get("bounds"), list):
        out["bounds"] = tuple(out["bounds"])
    for key, kind in _FILE_OPTIONS.items():
        value = out.get(key)
        if isinstance(value, (str, Path)):
            out[key] = read_exposure(value) if key == "exposure" else read_public_list(value, kind)
    if out.get("parties") == 1 and not isinstance(out.get("parties"), bool):
        out["parties"] = None
    for key in ("intercept", "drop_missing"):
        if out.get(key) is False:
            out[key] = None
    return out


def release_from_csv(data, family: str, out=None, *, extra: dict | None = None, **options):
    """Build a release from confidential records, as ``dpposterior release DATA.csv --family F ...`` does.

    ``data``: a CSV file (path) or a pandas DataFrame (read as the CSV's columns would be; it is not changed).
    ``family``: the data model.  ``out``: where to write the release (JSON; checked before any work), or None.
    ``options``: the command's options by their Python names -- ``epsilon``, ``rho``, ``mechanism``, ``seed``,
    ``target_epsilon``, ``target_rho``, ``delta`` and the family's own (``column``, ``columns``, ``bounds``,
    ``area_column``, ...; docs/cli.md, "Curator options"); ``columns``/``features`` may be a list or a
    comma-separated string, ``exposure``/``areas``/``cells`` a path (read as the CLI reads it) or the value
    itself.  ``extra``: options with no command-line flag (multinomial ``categories``, small-area
    ``areas``/``cells``, sir ``initial_infected``).  An option the family's curator does not take is refused
    in one line (:class:`~dpposterior.errors.InputError`), before the data are read.

    Returns the release.  Without ``seed`` the noise comes from OpenDP's samplers; with it, from a seeded numpy
    generator (reproducible, not for publication; the file's ``sampler`` says which).  The curator's notes
    (``--drop-missing``, areas read from the data, ...) are :class:`~dpposterior.errors.CuratorWarning`\\ s.
    """
    from .curator import CurateOptions, build_release
    from .errors import check_output_path

    if out is not None:
        check_output_path(out, "out")
    if not isinstance(family, str):
        raise InputError("family", f"must be a family name (got {family!r})")
    release = build_release(data, CurateOptions(family, extra=extra, **_curate_keywords(options)))
    if out is not None:
        release.save(out)
    return release


#: the options ``release --from-measurements`` takes besides the table, the family and --out
MEASUREMENT_OPTIONS = ("mechanism", "exposure", "parents", "postprocessing")
#: the families whose releases are read from a table of noisy measurements (small-area's ``read_measurements``)
MEASUREMENT_FAMILIES = ("small-area",)


def release_from_measurements(path, family: str = "small-area", out=None, *, mechanism: str | None = None,
                              exposure=None, parents: dict | None = None, postprocessing: str | None = None,
                              description: str | None = None):
    """A release file from a long-format table of noisy measurements, adding no noise.

    ``path``: a CSV with columns ``area``, ``cell``, ``noisy_value``, ``noise_variance`` (one row per area and
    cell; the shape of the Census noisy measurement files), read by
    :func:`dpposterior.families.small_area.read_measurements`: the values are already noisy, so nothing is
    noised here, and the privacy statement (``release.privacy()``, the file's ``accounting``) is what the
    stated discrete-Gaussian noise gives.  ``exposure``: public exposure per area, a dict or a CSV of
    ``area, exposure``; ``parents``: a dict area -> parent area or a CSV of ``area, parent``; ``postprocessing``: ``none`` (default) or
    ``nonnegative`` (the values were published as max(0, y + e)).  Returns the release; writes it to ``out``.
    """
    from .curator import read_exposure, read_parents
    from .errors import check_output_path
    from .families.small_area import read_measurements
    from .release import accounting_record, load_release

    if out is not None:
        check_output_path(out, "out")
    if family not in MEASUREMENT_FAMILIES:
        raise InputError("family", f"measurement tables are read for family small-area only (got {family!r})")
    if isinstance(exposure, (str, Path)):
        exposure = read_exposure(exposure)
    if isinstance(parents, (str, Path)):
        parents = read_parents(parents)
    if isinstance(mechanism, str):
        mechanism = mechanism.strip().lower()
    if description is None:
        description = (f"noisy measurements read from {Path(path).name}: no noise was added when this file was "
                       "written; the privacy statement rests on the noise the measurements state")
    table = read_measurements(path, mechanism=mechanism or "discrete-gaussian", exposure=exposure, parents=parents,
                              postprocessing=postprocessing or "none", description=description)
    release = load_release(table)
    release.accounting = accounting_record(release)
    if out is not None:
        release.save(out)
    return release
