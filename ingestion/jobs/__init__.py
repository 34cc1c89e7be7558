"""The flows the commands run, each one function the CLI calls: stage, sync, export, merge,
rebuild, maintain, watch, and looking (status, query). They report as they go through a
``Reporter`` the caller passes in, and hold a table through ``guard`` alone.

- ``reporter``: the ``Reporter`` a job tells what happened: lines, the ingest summary, drift, a
  merge's counts;
- ``stage``: export folders in time order or a stream's change files staged; drift adopted;
  ``detect-schema``;
- ``sync``: ``sync`` and ``export``: exports run in DynamoDB when asked, staged, merged;
- ``apply``: ``merge`` and ``rebuild``: the final tables built from the change logs;
- ``maintain``: ``maintain`` over several tables, then whole tables tested;
- ``remove``: ``remove-table``'s lakehouse side: the table's catalog tables, merge-log rows and
  lease dropped;
- ``inspection``: ``status``, ``drift`` and ``query`` (Spark's analysis errors as one-line
  ``QueryError``);
- ``watch``: ``watch`` of one table or several: one session, a tick every interval, the leases;
- ``ticks``: one tick of a watch: each table staged, one merge, compaction in turn; a table's
  failure held apart from the others;
- ``guard``: the table lock and the lease, always taken together here;
- ``table_lock``: one process of a kind per table on this machine (``flock``);
- ``lease``: one process of a kind per table across machines (a lease in the catalog).

May import: ``ingestion.upkeep``, ``ingestion.merge``, ``ingestion.staging``, ``ingestion.light``, ``ingestion.spark``,
``ingestion.schema``, ``ingestion.dynamodb``, ``ingestion.sources``, ``ingestion.config``,
``ingestion.fault_points``.
"""
