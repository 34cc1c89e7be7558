"""The full-refresh decision: a final table whose column types differ from its staging table's
(drift adopted since its last build, ``maintenance.adopt``) cannot be changed by an incremental
merge; the merge rebuilds it from the change log instead.

The comparison is with the staging table's actual column types, the types its rows were
written with (kept in the same commit as those rows: ``catalog.table_types``), never with a
file: an incremental merge into a narrower column would let Spark's store assignment cast a
wider value down (``1.5`` into a ``bigint`` column as ``1``) with every data test passing.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql import SparkSession

from ingestion.catalog import table_metadata
from ingestion.catalog.table import Table
from ingestion.catalog.table_metadata import Metadata
from ingestion.config import names
from ingestion.schema.item_json import IMAGE
from ingestion.staging.staging_table import ENTITIES_MOVED

log = logging.getLogger(__name__)


def needs_full_refresh(table: Table) -> bool:
    """A column of the final table has another type than the same column in staging, or (an
    entity's final table) rows of the change log moved to another entity since the entry's
    final tables were built (``staging_table.ENTITIES_MOVED``): from the two tables' metadata,
    as the table's handle read it."""
    final, staging = table.final, table.change_log
    if final is None or staging is None:
        return False
    if table.config.staging and staging.properties.get(ENTITIES_MOVED) == "true":
        log.info("%s: rows of %s moved entity: full refresh", table.name, table.config.staging)
        return True
    staged = staged_types(staging, table.name if table.config.staging else None)
    if IMAGE in final.columns and IMAGE not in staged and "_rest" in staged:
        # Staging moved to the remainder (decision 0012: a rebuild, an adoption of another
        # entity's drift) and this table still has the whole item: built again, in the new form.
        log.info("%s: staging keeps _rest, the final table _image: full refresh", table.name)
        return True
    for column, kind in final.columns.items():
        wanted, built = staged.get(column), plain_type(kind)
        if wanted is not None and built != wanted:
            log.info(
                "%s: column %s is %s in the final table, %s in staging: full refresh",
                table.name,
                column,
                built,
                wanted,
            )
            return True
    return False


def staged_types(staging: Metadata, entity: str | None = None) -> dict[str, str]:
    """The change log's column types (``plain_type``), an entity's struct fields among them."""
    staged = {c: plain_type(kind) for c, kind in staging.columns.items()}
    struct = staging.columns.get(entity) if entity else None
    for field in json.loads(struct).get("fields", []) if struct else []:
        staged[field["name"]] = plain_type(field["type"])
    return staged


def plain_type(kind: Any) -> str:
    """An Iceberg type as text without what differs between two tables of the same columns:
    field ids, docs and nullability (a final table's CTAS and its change log's create set
    `required` differently; Spark's types, which the merge writes through, have none)."""
    if isinstance(kind, str) and kind.startswith("{"):
        kind = json.loads(kind)
    if isinstance(kind, dict):
        dropped: tuple[str, ...] = ("id", "element-id", "key-id", "value-id", "doc", "required")
        dropped = (*dropped, "element-required", "value-required")
        return json.dumps({k: plain_type(v) for k, v in sorted(kind.items()) if k not in dropped})
    if isinstance(kind, list):
        return json.dumps([plain_type(v) for v in kind])
    return str(kind)


def entities_moved(spark: SparkSession, entry: str) -> bool:
    """Rows of the entry's change log moved to another entity since its final tables were built."""
    metadata = table_metadata.read(spark, names.staging_table(entry), fresh=True)
    return metadata is not None and metadata.properties.get(ENTITIES_MOVED) == "true"


def entities_refreshed(spark: SparkSession, entry: str) -> None:
    """Every final table of the entry was built again: the moved rows are where they belong."""
    if entities_moved(spark, entry):
        name = names.staging_table(entry)
        spark.sql(f"alter table {name} unset tblproperties if exists ('{ENTITIES_MOVED}')")
