"""The project's own files: a new table's entry in ``dbt_project.yml`` and its dbt files (the
staging source, the model and its tests), rendered from ``templates/``; and what the project
needs on this machine.

- ``onboarding``: ``add-table``: the entry validated with the others, then written with its files;
- ``scaffold``: the dbt files of a table, rendered from ``templates/*.j2``;
- ``removal``: ``remove-table``'s project side: the entries and files ``add-table`` wrote;
- ``doctor``: ``doctor``'s checks of this machine (Java, jars, catalog, dbt parse, disk).

May import: ``ingestion.upkeep``, ``ingestion.merge``, ``ingestion.staging``, ``ingestion.light``, ``ingestion.spark``,
``ingestion.schema``, ``ingestion.dynamodb``, ``ingestion.sources``, ``ingestion.config``,
``ingestion.fault_points``.
"""
