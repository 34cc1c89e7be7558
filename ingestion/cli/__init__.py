"""The command line (``ddb-lakehouse``, ``python -m ingestion.cli``, ``spark-submit
ingestion/main.py``). A command's handler parses its arguments, calls one function of a room
below (``jobs`` mostly) and prints; it holds no logic of its own.

- ``main``: the root parser; an error of the family (``LakehouseError``) printed on one line;
- ``arguments``: argument groups several commands share, and the table selection;
- ``output``: everything printed: result tables, run summaries, the console ``Reporter``;
- ``tables``: ``init`` and ``add-table``;
- ``exports``: ``ingest``, ``sync``, ``export`` and ``detect-schema``;
- ``streams``: ``watch``;
- ``merge``: ``merge``, ``rebuild`` and ``drift``;
- ``maintenance``: ``maintain``;
- ``inspection``: ``status`` and ``query``;
- ``aws``: ``register-glue`` and ``emr`` (package, submit);
- ``demo``: ``sample`` and ``demo``;
- ``__main__``: ``python -m ingestion.cli``.

May import: ``ingestion.aws``, ``ingestion.samples``, ``ingestion.jobs``, ``ingestion.project``,
``ingestion.upkeep``, ``ingestion.merge``, ``ingestion.staging``, ``ingestion.light``, ``ingestion.spark``,
``ingestion.schema``, ``ingestion.dynamodb``, ``ingestion.sources``, ``ingestion.config``,
``ingestion.fault_points``.
"""

from __future__ import annotations

from ingestion.cli.main import main

__all__ = ["main"]
