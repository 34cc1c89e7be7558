"""DynamoDB JSON -> typed, flattened columns, with Spark's own functions.

- ``tables``: the table configuration (keys, options), read from ``dbt_project.yml``;
- ``naming``: attribute name -> column name (mirrored by ``macros/keys.sql``);
- ``types``: the column type model (``ColumnType``, ``Attribute``, ``Schema``);
- ``schema_file``: ``schemas/<table>.json`` read and written;
- ``type_rules``: detection statistics -> column types (change a type rule here);
- ``detect``: one distributed pass over every item -> statistics;
- ``values``: Spark SQL over one DynamoDB value (sets sorted, JSON text);
- ``numbers``: Spark SQL over a number's exact text (digits, fits, canonical text of a key);
- ``decode``: a line's envelope and its change columns (operation, version, sequence);
- ``typed_columns``: an item's image -> the schema's typed columns, drift flagged.

May import: ``ingestion.sources``, ``ingestion.config``.
"""
