"""Keeping tables healthy after they are built: compaction and expiry with readers never
failing, drift adopted by rebuilding staging from the images, a table's status, a table proved against
its DynamoDB table's export.

- ``maintenance``: ``maintain`` of one table: compaction, the ledger carried forward, expiry,
  orphan files;
- ``expiry``: snapshots expired and staged rows pruned without losing a ledger entry;
- ``rebuild``: staging rebuilt from ``_image`` with types detected again;
- ``adopt``: drift adopted: the rebuild when values do not fit (the table's ``adopt_drift``);
- ``entity_moves``: rows staged under the earlier key rule moved to their entity, before a merge;
- ``status``: where a table stands: its ledger, what is staged and not merged, the final table;
- ``verify``: a final table against a full export of its DynamoDB table, item by item;
- ``fingerprints``: each item's key and hash of its canonical DynamoDB JSON, in the JVM;
- ``first_pass``: verify's first pass, the fingerprints summed per bucket of keys on each side;
- ``verify_log``: the verify runs, for ``status``.

May import: ``ingestion.merge``, ``ingestion.staging``, ``ingestion.light``, ``ingestion.spark``, ``ingestion.schema``,
``ingestion.dynamodb``, ``ingestion.sources``, ``ingestion.config``, ``ingestion.fault_points``.
"""
