"""DynamoDB JSON with Spark's own functions (values, numbers, a line's change columns, the order
of changes to a key), attribute names as column names, and the table configuration; no column
types here (``ingestion.schema`` holds them)."""
