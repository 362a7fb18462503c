"""Reads a table Warrant wrote, through PyIceberg, and prints its rows and snapshots as JSON.

Usage: iceberg_read.py URI TOKEN PREFIX TABLE (dotted: namespace levels and the table)
"""

import json
import sys

from pyiceberg.catalog.rest import RestCatalog

uri, token, prefix, table = sys.argv[1:5]
catalog = RestCatalog("read", uri=uri, prefix=prefix, token=token)
t = catalog.load_table(tuple(table.split(".")))
rows = t.scan().to_arrow().to_pylist()
for row in rows:
    row["published_at"] = row["published_at"].isoformat()
print(json.dumps({
    "rows": sorted(rows, key=lambda r: r["entry_id"]),
    "snapshots": [
        {"id": s.snapshot_id, "operation": s.summary.operation.value, "entry": s.summary.additional_properties.get("warrant.entry-id")}
        for s in t.snapshots()
    ],
}, ensure_ascii=False))
