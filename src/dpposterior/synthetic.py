"""Noise-aware synthetic data: m data sets from the posterior predictive of a table model fitted to noisy
marginals (Räisä, Jälkö, Kaski & Honkela, "Noise-aware statistical inference with differentially private
synthetic data", AISTATS 2023, Sec. 3: draw theta_j from the posterior, then a data set from p(x | theta_j)).

Analysed one by one and combined with the synthetic-data rules (:func:`dpposterior.combine`), they give a
downstream analysis intervals that carry the DP noise and the model's uncertainty; a single synthetic data set
from a point estimate carries neither.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError


def synthesize(post, m: int = 10, rows: int | None = None, seed=None, as_codes: bool = False):
    """``m`` synthetic data sets (pandas DataFrames, one column per attribute, its public levels as values; codes
    with ``as_codes``) of ``rows`` rows each (default: the release's n, or where the release had none each posterior
    draw's own n), each from its own posterior draw (drawn without replacement from all chains' draws by ``seed``).

    ``post``: a :class:`~dpposterior.posterior.Posterior` of the ``marginals`` family, or the path of its file.
    """
    import pandas as pd

    from .posterior import Posterior

    if not isinstance(post, Posterior):
        post = Posterior.read(post)
    tree = post.junction_tree()
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise InputError("m", f"must be an integer >= 1 (got {m!r})")
    total = post.nchains * post.ndraws
    if m > total:
        raise InputError("m", f"{m} data sets need {m} posterior draws; the posterior has {total}")
    draw_n = None
    if rows is None:
        rows = post.attrs.get("n")
        if rows is None and "n" in post.posterior:  # the total was unknown: each draw's own n
            draw_n = np.asarray(post.posterior["n"]).reshape(total).astype(np.int64)
            rows = int(draw_n.max())
        if rows is None:
            raise InputError("rows", "the release did not publish n: give the number of rows")
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:
        raise InputError("rows", f"must be an integer >= 1 (got {rows!r})")
    rows = int(rows)
    cells = sum(1 for _ in tree.attributes) * rows * m
    if cells > 2e9:
        raise InputError("rows", f"{m} data sets of {rows:,} rows x {len(tree.attributes)} columns is more than "
                         "2e9 values; give fewer rows or data sets")
    rng = np.random.default_rng(seed)
    picks = np.sort(rng.choice(total, size=m, replace=False))
    tables = [t.reshape(total, *t.shape[2:]) for t in post.clique_tables()]
    out = []
    for j in picks:
        codes = tree.sample_records([t[j] for t in tables], rows if draw_n is None else int(draw_n[j]), rng)
        frame = pd.DataFrame(codes, columns=list(tree.attributes))
        if not as_codes:
            for a in tree.attributes:
                labels = post.coords.get(a)
                if labels is not None and len(labels) == tree.sizes[a]:
                    frame[a] = np.asarray(labels, dtype=object)[frame[a].to_numpy()]
        frame.attrs["posterior_draw"] = int(j)
        out.append(frame)
    return out
