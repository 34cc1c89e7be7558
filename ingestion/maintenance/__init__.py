"""Keeping tables healthy after they are built: compaction and expiry with readers never failing,
drift adopted by rebuilding staging, a single-table design's rows moved to their entity, a
table's status, and a final table proved against an export of its DynamoDB table (``verify``)."""
