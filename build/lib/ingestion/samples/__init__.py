"""Sample data in AWS's exact layout, for the demo and the tests.

- ``items``: the ``books`` and ``orders`` items (every DynamoDB type);
- ``exports``: full exports with manifests and checksums;
- ``orders_chain``: incremental exports of ``orders`` after its full export;
- ``stream``: stream change files of ``books``, written through the Lambda writer;
- ``live``: what the files leave, computed in plain Python (the expected final state).

May import: ``ingestion.lake`` and every room below it (in practice only ``sources``).
"""
