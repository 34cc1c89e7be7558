"""Sources -> staging change logs: every export or stream batch appended to
``staging.<table>`` in one Iceberg commit that carries its ledger entry.

- ``append``: one staging commit per source, its ledger entry in the snapshot summary; duplicate
  commits removed;
- ``staging_table``: the staging table's properties, its creation (by a first batch's commit when
  its types are still to be proven), its column order;
- ``ledger``: the ledger: which sources each staging commit applied, read back from the snapshot
  summaries;
- ``chain``: the chain of exports: gaps, fillings, overlaps, the windows still to export;
- ``exports``: an export folder staged: its schema (detected when missing), new attributes, counts
  checked;
- ``streams``: the stream's settled change files staged in one commit, then deleted;
- ``stream_rejects``: damaged change-file lines set aside in ``staging.<table>_rejects``;
- ``drift``: values staged that did not fit their column, per attribute and source;
- ``table_types``: the table's column types, kept in a property of its staging table (the one
  truth every job reads);
- ``entity_types``: a single-table design's types, one section per entity, and its kept rule.

May import: ``ingestion.light``, ``ingestion.spark``, ``ingestion.schema``, ``ingestion.dynamodb``,
``ingestion.sources``, ``ingestion.config``, ``ingestion.fault_points``.
"""
