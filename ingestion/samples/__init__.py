"""Sample data in AWS's exact layout, for the demo and the tests, and the demo itself.

- ``items``: the ``books`` and ``orders`` items (every DynamoDB type);
- ``exports``: full exports with manifests and checksums;
- ``orders_chain``: incremental exports of ``orders`` after its full export;
- ``stream``: stream change files of ``books``, written through the Lambda writer;
- ``single_table``: a single-table design ``app`` (users, orders, addresses) for ``sample``;
- ``live``: what the files leave, computed in plain Python (the expected final state);
- ``demo``: ``sample`` (the files written) and ``demo`` (through the whole flow, compared with
  ``live``).

May import: ``ingestion.jobs``, ``ingestion.project``, ``ingestion.upkeep``, ``ingestion.merge``,
``ingestion.staging``, ``ingestion.light``, ``ingestion.spark``, ``ingestion.schema``, ``ingestion.dynamodb``,
``ingestion.sources``, ``ingestion.config``, ``ingestion.fault_points``.
"""
