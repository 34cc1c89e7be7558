"""The full-refresh decision: a final table whose column types differ from its staging table's
(drift adopted since its last build, ``upkeep.adopt``) cannot be changed by an incremental
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

log = logging.getLogger(__name__)


def needs_full_refresh(spark: SparkSession, table: TableConfig) -> bool:
    """A column of the final table has another type than the same column in staging."""
    final, staging = names.final_table(table.name), names.staging_table(table.name)
    if not spark.catalog.tableExists(final) or not spark.catalog.tableExists(staging):
        return False
    staged_fields = spark.table(staging).schema.fields
    staged = {f.name: f.dataType.simpleString() for f in staged_fields}
    if table.staging:  # an entity's final table: its columns are its struct column's fields
        entity = next((f.dataType for f in staged_fields if f.name == table.name), None)
        staged |= {f.name: f.dataType.simpleString() for f in getattr(entity, "fields", [])}
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
