"""A table's column types: the type model, the schema file, the type rules, detection from
the items, an item's image decoded into the schema's typed columns, and a typed row encoded
back to compare with DynamoDB's.

- ``types``: the column type model (``ColumnType``, ``Attribute``, ``Schema``);
- ``schema_file``: ``schemas/<table>.json`` read and written; ``table_schema_file``, the one
  loader;
- ``type_rules``: detection statistics -> column types (change a type rule here);
- ``detect``: one distributed pass over every item -> statistics -> a schema;
- ``shapes``: the shape of the first items: the typed parse detection tries first;
- ``shape_stats``: statistics of every path in one aggregation, from the typed parse;
- ``layouts``: how an attribute's values are parsed (typed, or as text);
- ``typed_columns``: one value -> its column value (null when it does not fit);
- ``typed_rows``: an item's image -> a staging row's typed columns, drift flagged; for a
  single-table design ``_entity`` and one struct column per entity;
- ``first_items``: types of a batch's first items, checked at every path as the batch is staged;
- ``canonical``: DynamoDB JSON canonical, a final row encoded back, the two compared (``verify``).

May import: ``ingestion.dynamodb``, ``ingestion.sources``, ``ingestion.config``,
``ingestion.fault_points``.
"""
