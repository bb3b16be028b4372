"""Area outlines from GeoJSON, matched to a small-area posterior's areas, for ``report --geometry``.

Read with the standard library (``json``) and drawn with matplotlib's ``PolyCollection``: no geopandas.
A feature is matched to an area by one property (``--geometry-key NAME``), or by the first of
:data:`DEFAULT_KEYS` (and the feature's own ``id``) that matches the most areas.  ``Polygon`` and
``MultiPolygon`` geometries are drawn (each polygon's outer ring; features of other types are skipped).
Holes are not cut out: polygons are drawn largest first, so an area inside another's hole is drawn over it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError

#: properties tried in order when no --geometry-key is given (case-insensitive), then the feature's ``id``
DEFAULT_KEYS = ("id", "GEOID", "FIPS", "GEOID20", "GEOID10", "area", "name", "NAME")
FEATURE_ID = "the feature id"


@dataclass
class Feature:
    properties: dict
    feature_id: object
    #: outer rings, each an (n, 2) array of (x, y) = (longitude, latitude) for unprojected data
    rings: list


def _key_text(value) -> str | None:
    """A property value as an area id: numbers without a trailing .0 (FIPS 37009.0 -> "37009")."""
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_geojson(path, field: str = "geometry") -> list[Feature]:
    """The polygonal features of a GeoJSON FeatureCollection (or one Feature); a one-line InputError otherwise."""
    path = Path(path)
    if not path.is_file():
        raise InputError(field, f"file not found: {path}")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(field, f"cannot read {path} as GeoJSON ({type(exc).__name__})") from None
    if isinstance(doc, dict) and doc.get("type") == "Feature":
        doc = {"type": "FeatureCollection", "features": [doc]}
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection" or not isinstance(doc.get("features"), list):
        raise InputError(field, f"{path} is not a GeoJSON FeatureCollection (no \"type\": \"FeatureCollection\" "
                                "with a \"features\" list)")
    out = []
    for k, feat in enumerate(doc["features"]):
        if not isinstance(feat, dict):
            raise InputError(field, f"{path}: feature {k} is not an object")
        geom = feat.get("geometry") or {}
        kind, coords = geom.get("type"), geom.get("coordinates")
        if kind == "Polygon":
            polygons = [coords]
        elif kind == "MultiPolygon":
            polygons = coords
        else:
            continue
        try:
            rings = [np.asarray(polygon[0], dtype=float)[:, :2] for polygon in polygons if polygon]
        except (TypeError, ValueError, IndexError):
            raise InputError(field, f"{path}: feature {k} has malformed {kind} coordinates") from None
        rings = [r for r in rings if r.ndim == 2 and len(r) >= 3 and np.isfinite(r).all()]
        if rings:
            out.append(Feature(feat.get("properties") or {}, feat.get("id"), rings))
    if not out:
        raise InputError(field, f"{path} has no Polygon or MultiPolygon feature")
    return out


def _values(features: list[Feature], key: str) -> list[str | None]:
    """Each feature's value of property ``key`` (case-insensitive), or its id for :data:`FEATURE_ID`."""
    if key == FEATURE_ID:
        return [_key_text(f.feature_id) for f in features]
    out = []
    for f in features:
        value = f.properties.get(key)
        if value is None:
            lower = {str(k).lower(): v for k, v in f.properties.items()}
            value = lower.get(key.lower())
        out.append(_key_text(value))
    return out


def match_areas(areas, features: list[Feature], key: str | None = None, field: str = "geometry"):
    """``(rings per area index, key used, features matched to no area)``: the areas' outlines.  With ``key``
    None, the first of :data:`DEFAULT_KEYS` and the feature id that matches the most areas.  Refuses in one
    line when no area matches."""
    areas = [str(a) for a in areas]
    wanted = set(areas)
    if key is not None:
        values = _values(features, key)
        if all(v is None for v in values):
            names = sorted({str(k) for f in features for k in f.properties})[:12]
            raise InputError("geometry-key", f"no feature has a property {key!r} (properties: "
                                             f"{', '.join(names) or 'none'})")
        candidates = [(key, values)]
    else:
        candidates = [(k, _values(features, k)) for k in (*DEFAULT_KEYS, FEATURE_ID)]
    best_key, best_values, best = None, None, -1
    for k, values in candidates:
        hits = len(wanted.intersection(v for v in values if v is not None))
        if hits > best:
            best_key, best_values, best = k, values, hits
    if best <= 0:
        tried = key if key is not None else ", ".join((*DEFAULT_KEYS, FEATURE_ID))
        example = next((v for v in best_values if v is not None), None) if best_values else None
        raise InputError(field, f"no area of the posterior matches a feature (by {tried}; areas look like "
                                f"{areas[0]!r}" + (f", features like {example!r}" if example is not None else "")
                         + "): name the matching property with --geometry-key")
    by_value: dict[str, list] = {}
    for f, v in zip(features, best_values):
        if v in wanted:
            by_value.setdefault(v, []).extend(f.rings)
    rings = {i: by_value[a] for i, a in enumerate(areas) if a in by_value}
    others = [r for f, v in zip(features, best_values) if v not in wanted for r in f.rings]
    return rings, best_key, others


def _ring_area(ring: np.ndarray) -> float:
    x, y = ring[:, 0], ring[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))


def draw_choropleth(ax, rings: dict, values: np.ndarray, others: list, cmap: str, label: str, norm=None):
    """Fill each area's rings with its value (``values[area index]``) on ``ax``; ``others`` (features of no
    area) in light grey.  Returns the collection (for a colour bar)."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    polys, colours = [], []
    for i, area_rings in rings.items():
        for r in area_rings:
            polys.append(r)
            colours.append(values[i])
    order = np.argsort([-_ring_area(p) for p in polys], kind="stable")  # largest first: enclaves on top
    coll = PolyCollection([polys[k] for k in order], array=np.asarray(colours, float)[order], cmap=cmap, norm=norm,
                          edgecolors="0.35", linewidths=0.3)
    if others:
        ax.add_collection(PolyCollection(others, facecolors="0.88", edgecolors="0.6", linewidths=0.3))
    ax.add_collection(coll)
    everything = np.concatenate(polys + list(others))
    lo, hi = everything.min(axis=0), everything.max(axis=0)
    pad = 0.02 * (hi - lo)
    ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
    ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])
    if -180 <= lo[0] and hi[0] <= 180 and -90 <= lo[1] and hi[1] <= 90:  # longitude/latitude: local scale
        ax.set_aspect(1.0 / max(0.1, math.cos(math.radians(0.5 * (lo[1] + hi[1])))))
    else:
        ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    plt.colorbar(coll, ax=ax, shrink=0.8, label=label)
    return coll
