"""DynamoDB JSON with Spark's own functions, and the table configuration; no column types
here (``ingestion.schema`` holds them).

- ``tables``: the table configuration (keys, options), read from ``dbt_project.yml``;
- ``entities``: a single-table design's entity rule, its final tables and ``_entity`` in SQL;
- ``naming``: attribute name -> column name (mirrored by ``macros/column_name.sql``);
- ``values``: Spark SQL over one DynamoDB value (sets sorted, JSON text);
- ``numbers``: Spark SQL over a number's exact text (digits, fits, canonical text of a key);
- ``decode``: a line's envelope and its change columns (operation, version, sequence);
- ``change_order``: the order of changes to one key (full exports, incrementals, stream records).

May import: ``ingestion.sources``, ``ingestion.config``, ``ingestion.fault_points``.
"""
