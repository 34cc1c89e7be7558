"""The full-refresh decision: a final table whose column types differ from its staging table's
(drift adopted since its last build, ``maintenance.adopt``) cannot be changed by an incremental
merge; the merge rebuilds it from the change log instead.

The comparison is with the staging table's actual column types, the types its rows were
written with (kept in the same commit as those rows: ``staging.table_types``), never with a
file: an incremental merge into a narrower column would let Spark's store assignment cast a
wider value down (``1.5`` into a ``bigint`` column as ``1``) with every data test passing.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema.item_json import IMAGE
from ingestion.spark import table_metadata
from ingestion.staging.staging_table import ENTITIES_MOVED

log = logging.getLogger(__name__)


def needs_full_refresh(spark: SparkSession, table: TableConfig) -> bool:
    """A column of the final table has another type than the same column in staging, or (an
    entity's final table) rows of the change log moved to another entity since the entry's
    final tables were built (``staging_table.ENTITIES_MOVED``)."""
    final, staging = names.final_table(table.name), names.staging_table(table.name)
    if not spark.catalog.tableExists(final) or not spark.catalog.tableExists(staging):
        return False
    if table.staging and entities_moved(spark, table.staging):
        log.info("%s: rows of %s moved entity: full refresh", table.name, table.staging)
        return True
    staged_fields = spark.table(staging).schema.fields
    staged = {f.name: f.dataType.simpleString() for f in staged_fields}
    if table.staging:  # an entity's final table: its columns are its struct column's fields
        entity = next((f.dataType for f in staged_fields if f.name == table.name), None)
        staged |= {f.name: f.dataType.simpleString() for f in getattr(entity, "fields", [])}
    built_columns = spark.table(final).columns
    if IMAGE in built_columns and IMAGE not in staged and "_rest" in staged:
        # Staging moved to the remainder (decision 0012: a rebuild, an adoption of another
        # entity's drift) and this table still has the whole item: built again, in the new form.
        log.info("%s: staging keeps _rest, the final table _image: full refresh", table.name)
        return True
    for field in spark.table(final).schema.fields:
        wanted = staged.get(field.name)
        built = field.dataType.simpleString()
        if wanted is not None and built != wanted:
            log.info(
                "%s: column %s is %s in the final table, %s in staging: full refresh",
                table.name,
                field.name,
                built,
                wanted,
            )
            return True
    return False


def entities_moved(spark: SparkSession, entry: str) -> bool:
    """Rows of the entry's change log moved to another entity since its final tables were built."""
    metadata = table_metadata.read(spark, names.staging_table(entry), fresh=True)
    return metadata is not None and metadata.properties.get(ENTITIES_MOVED) == "true"


def entities_refreshed(spark: SparkSession, entry: str) -> None:
    """Every final table of the entry was built again: the moved rows are where they belong."""
    if entities_moved(spark, entry):
        name = names.staging_table(entry)
        spark.sql(f"alter table {name} unset tblproperties if exists ('{ENTITIES_MOVED}')")
