"""Seeds a real Iceberg REST catalog (lakana-server) for the catalog tests, through PyIceberg.

Usage: iceberg_seed.py URI TOKEN ENVIRONMENT WAREHOUSE_DIR
Creates the environment (lakana's REST prefix) on WAREHOUSE_DIR, the namespaces bronze.sales and
bronze."ventes été", a partitioned table bronze.sales.orders with two rows, and a table
bronze."ventes été"."注文"; prints what the catalog then lists, as JSON.
"""

import json
import sys
import urllib.request

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

uri, token, env, warehouse = sys.argv[1:5]

request = urllib.request.Request(
    f"{uri}/api/v1/environments",
    data=json.dumps({"name": env, "storage": {"scheme": "file", "root": f"file://{warehouse}"}}).encode(),
    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    method="POST",
)
urllib.request.urlopen(request).read()

catalog = RestCatalog("seed", uri=uri, prefix=env, token=token)
catalog.create_namespace(("bronze", "sales"))
catalog.create_namespace(("bronze", "ventes été"))
schema = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "city", StringType(), required=False, doc="where it was ordered"),
)
spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="city"))
orders = catalog.create_table(
    ("bronze", "sales", "orders"), schema=schema, partition_spec=spec, properties={"owner": "sales-team"}
)
orders.append(pa.Table.from_pylist([{"id": 1, "city": "Paris"}, {"id": 2, "city": "Zürich"}], schema=orders.schema().as_arrow()))
catalog.create_table(("bronze", "ventes été", "注文"), schema=Schema(NestedField(1, "id", LongType(), required=False)))
print(json.dumps({
    "namespaces": [list(n) for n in catalog.list_namespaces(("bronze",))],
    "tables": [list(t) for t in catalog.list_tables(("bronze", "sales"))],
}, ensure_ascii=False))
