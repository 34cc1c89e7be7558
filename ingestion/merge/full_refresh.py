"""The full-refresh decision: a final table whose column types differ from the table's schema
(drift adopted since its last build, ``upkeep.adopt``) cannot be changed by an incremental merge;
the merge rebuilds it from the change log instead."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import schema_file

log = logging.getLogger(__name__)


def needs_full_refresh(spark: SparkSession, table: TableConfig) -> bool:
    """The final table's column types differ from the schema file's (drift adopted since its
    last build): an incremental merge cannot change them, a full refresh must."""
    final = names.final_table(table.name)
    current = schema_file.table_schema_file(table)
    if current is None or not spark.catalog.tableExists(final):
        return False
    columns = {f.name: f.dataType.simpleString() for f in spark.table(final).schema.fields}
    for attribute in schema_file.from_file(current).attributes:
        built = columns.get(attribute.column)
        wanted = T._parse_datatype_string(attribute.type.sql()).simpleString()
        if built is not None and built != wanted:
            log.info(
                "%s: column %s is %s in the final table, %s in the schema: full refresh",
                table.name,
                attribute.column,
                built,
                wanted,
            )
            return True
    return False
