"""Write a :class:`~dpposterior.posterior.Posterior` as an ArviZ InferenceData netCDF file, with h5netcdf only.

Source: the layout ``arviz.InferenceData.to_netcdf(engine="h5netcdf")`` (ArviZ 0.23) writes for
``arviz.from_dict`` -- root attributes, then one netCDF4 group per InferenceData group (``posterior``,
``posterior_predictive``, ``sample_stats``) with ``chain``/``draw`` and event-dimension coordinate
variables, variables gzip-compressed, floats with ``_FillValue`` NaN, booleans as int8 with
``dtype = "bool"`` (xarray's encoding), each group's attributes ``created_at``, ``arviz_version`` and
ours.  ``arviz.from_netcdf`` reads it back identical to the file ArviZ wrote (``tests/test_netcdf.py``): ArviZ
0.x as an InferenceData, ArviZ 1.x (``xarray.open_datatree``) as a DataTree (``tests/test_arviz_cross.py``); the
format contract is docs/cli.md ("infer --out").

Why not ArviZ: importing it (2.4 s here) and xarray with it cost more than a default ``dpposterior infer``
computes (so that importing stays light; docs/architecture.md, "Imports stay light").
"""

from __future__ import annotations

import datetime
import functools
import os

import numpy as np

#: float variables larger than this are written without gzip (see _create)
UNCOMPRESSED_FLOAT_BYTES = 64 << 20
#: the InferenceData groups a Posterior may carry, in ArviZ's order
GROUPS = ("posterior", "posterior_predictive", "sample_stats")
#: attributes of the file only, not repeated on each group: the release's own text (78 MB at 10^7 cells, where
#: each copy costs about 0.5 s to write), which ArviZ's own ``to_netcdf`` also keeps on the root alone
FILE_ONLY_ATTRS = ("release_json",)


def group_attrs(attrs: dict) -> dict:
    """The attributes each group carries besides ``created_at`` and ``arviz_version``: the file's, less
    :data:`FILE_ONLY_ATTRS`."""
    return {key: value for key, value in attrs.items() if key not in FILE_ONLY_ATTRS}


@functools.lru_cache(maxsize=None)
def _arviz_version() -> str:
    """The installed ArviZ's version (the InferenceData schema the file follows), without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("arviz")
    except PackageNotFoundError:  # pragma: no cover - arviz is a dependency
        return "none"


def _event_dims(name: str, arr: np.ndarray, dims: dict, coords: dict):
    """ArviZ's ``generate_dims_coords``: the given dim names, else ``{name}_dim_{i}``; coords, else 0..n-1."""
    given = list(dims.get(name, []))
    out = []
    for i, size in enumerate(arr.shape[2:]):
        dim = given[i] if i < len(given) else f"{name}_dim_{i}"
        values = np.asarray(coords[dim]) if dim in coords else np.arange(size)
        if len(values) != size:
            raise ValueError(f"coords[{dim!r}] has {len(values)} values for a dimension of size {size}")
        out.append((dim, values))
    return out


def _create(group, name: str, dims: tuple, values: np.ndarray) -> None:
    values = np.asarray(values)
    attrs = {}
    if values.dtype.kind in "USO":  # strings (coordinate labels): variable-length, uncompressed
        import h5py  # (loaded by h5netcdf already)

        var = group.create_variable(name, dims, dtype=h5py.string_dtype())
        var[:] = values.astype(str).astype(object)
        return
    if values.dtype.kind == "b":  # xarray's boolean encoding
        values, attrs = values.astype("i1"), {"dtype": "bool"}
    fill = np.nan if values.dtype.kind in "fc" else None
    # MCMC draws of a continuous variable barely compress (a small-area u: 6%) and gzip costs about 40 s per
    # GB to write and 10 s to read on the 2-core machine, so large float variables are stored uncompressed
    compression = None if values.dtype.kind == "f" and values.nbytes > UNCOMPRESSED_FLOAT_BYTES else "gzip"
    var = group.create_variable(name, dims, data=values, compression=compression, fillvalue=fill)
    if fill is not None:
        var.attrs["_FillValue"] = values.dtype.type(fill)
    var.attrs.update(attrs)


def _string_attrs(attrs: dict) -> dict:
    """``attrs`` with each string as a 0-d array of h5py's variable-length UTF-8 string type: the attribute h5py
    writes for a ``str``, byte for byte, without h5netcdf's ``np.asarray(value)`` first -- a fixed-width UCS-4 copy
    of the string (4 bytes a character: 0.3 GB for the release JSON of a 10^7-cell table, twice a file)."""
    import h5py

    kind = h5py.string_dtype()
    return {key: np.array(value, dtype=kind) if isinstance(value, str) else value for key, value in attrs.items()}


def write_posterior(post, path, attrs: dict, stored: dict | None = None) -> None:
    """Write ``post`` to ``path`` (netCDF4/HDF5) with file attributes ``attrs`` (``Posterior.netcdf_attrs``);
    ``stored``: its posterior variables as written (``Posterior.stored()``: float32 where it says so)."""
    import h5netcdf

    groups = {name: getattr(post, name) for name in GROUPS if getattr(post, name)}
    if stored is not None:
        groups["posterior"] = stored
    # a path, or a binary file object (an in-memory buffer: Posterior.to_netcdf writes the bytes itself)
    with h5netcdf.File(path if hasattr(path, "write") else os.fspath(path), "w") as f:
        f.attrs.update(_string_attrs(attrs))
        for group_name, variables in groups.items():
            group = f.create_group(group_name)
            group.attrs.update(_string_attrs({"created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                                              "arviz_version": _arviz_version(), **group_attrs(attrs)}))
            first = np.asarray(next(iter(variables.values())))
            coordinates = [("chain", np.arange(first.shape[0])), ("draw", np.arange(first.shape[1]))]
            layout = {}
            for name, arr in variables.items():
                arr = np.asarray(arr)
                event = _event_dims(name, arr, post.dims, post.coords)
                layout[name] = (arr, ("chain", "draw", *(dim for dim, _ in event)))
                coordinates += [pair for pair in event if pair[0] not in dict(coordinates)]
            for dim, values in coordinates:
                group.dimensions[dim] = len(values)
            for dim, values in coordinates:
                _create(group, dim, (dim,), values)
            for name, (arr, dims) in layout.items():
                _create(group, name, dims, arr)
