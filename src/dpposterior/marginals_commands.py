"""``dpposterior marginal`` and ``dpposterior synthesize``: what an analyst takes out of a posterior of noisy
marginals (docs/marginals.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InputError


def marginal_table(post, attributes, level: float = 0.9, counts: bool = False):
    """One row per cell of the marginal: the attributes' levels, mean, median, and the central ``level``
    interval (pandas DataFrame)."""
    import pandas as pd

    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < float(level) < 1.0:
        raise InputError("level", f"must lie in (0, 1) (got {level!r})")
    arr = post.marginal(attributes, counts=counts)
    attrs = [d for d in arr.dims if d not in ("chain", "draw")]
    flat = arr.values.reshape(-1, *arr.shape[2:])
    lo_q, hi_q = (1.0 - level) / 2.0, 1.0 - (1.0 - level) / 2.0
    stats = {"mean": flat.mean(axis=0), "median": np.median(flat, axis=0),
             f"lower_{level:g}": np.quantile(flat, lo_q, axis=0), f"upper_{level:g}": np.quantile(flat, hi_q, axis=0)}
    index = pd.MultiIndex.from_product([list(arr.coords[a].values) for a in attrs], names=attrs)
    return pd.DataFrame({k: v.ravel() for k, v in stats.items()}, index=index).reset_index()


def marginal_command(posterior: Path, attributes: str, out: Path, level: float, counts: bool) -> Path:
    from .errors import check_output_path
    from .files import write_bytes
    from .posterior import Posterior

    check_output_path(out, "--out")
    post = Posterior.read(posterior)
    table = marginal_table(post, attributes, level, counts)
    write_bytes(out, table.to_csv(index=False), field="out")
    return out


def synthesize_command(posterior: Path, m: int, out: Path, rows, seed) -> list[Path]:
    from .files import write_bytes
    from .posterior import Posterior
    from .synthetic import synthesize

    post = Posterior.read(posterior)
    sets = synthesize(post, m=m, rows=rows, seed=seed)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError("out", f"{out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for j, frame in enumerate(sets, start=1):
        path = out / f"synthetic-{j}.csv"
        write_bytes(path, frame.to_csv(index=False), field="out")
        paths.append(path)
    return paths
