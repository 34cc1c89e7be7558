{#-
  A full export re-baselines the table: an item missing from it was deleted before its export
  time. Its version (the export time) is the latest full export version among the new batches
  (or, for a full build, among all staged rows); rows older than it that it does not hold go.
-#}
{% macro dynamodb_baseline_version(table, relation, batches=none) -%}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {%- set known = dynamodb_known_full_exports(table) -%}
  {%- if known is not none -%}
    {{ return(known['newest'] if batches is none else known['among_batches']) }}
  {%- endif -%}
  {{ return(run_query(dynamodb_newest_full_export_sql(relation, batches)).columns[0].values()[0]) }}
{%- endmacro %}

{#-
  The same versions from the ledger, as `ddb-lakehouse` hands them over to `dbt run` and `dbt
  test` (`dynamodb_full_exports: {<table>: {newest, among_batches}}`,
  ingestion/merge/full_exports.py, full_export_versions): no scan of the change log's `_version`, and an export that held no item
  still counts. None without them (a plain `dbt run`, or a ledger that cannot say): the scan,
  which finds no export that staged no row.
-#}
{% macro dynamodb_known_full_exports(table) -%}
  {{ return((dynamodb_run_var('dynamodb_full_exports') or {}).get(table)) }}
{%- endmacro %}

{#-
  The version (export time) of the newest full export staged in `relation`, or among `batches`
  when given; null when there is none.
-#}
{% macro dynamodb_newest_full_export_sql(relation, batches=none) -%}
select max(`_version`) from {{ relation }} where `_operation` = 'snapshot'
{%- if batches is not none %} and `_batch_id` in ({{ dynamodb_quoted_list(batches) if batches else "''" }}){% endif %}
{%- endmacro %}

{#-
  The full-export baseline, for one change (columns of `change`, or unprefixed without it): the
  change removes its key's row when it is a delete, or when it is older than `floor`, the version
  of the newest full export staged (an item missing from that export was deleted before it; none:
  no full export), unless it is a kept TTL expiry (`ttl_deletes: keep`: dynamodb_is_kept_expiry).
  The incremental merge and the full build apply the same rule.
-#}
{% macro dynamodb_removes_the_row(table, floor, change=none) -%}
  {%- set prefix = (change ~ '.') if change else '' -%}
({{ prefix }}`_operation` in {{ dynamodb_delete_operations(table) }}
  {%- if floor is not none %} or ({{ prefix }}`_version` < {{ floor }}
  {{- ' and not ' ~ dynamodb_is_kept_expiry(table, change) }}){% endif %})
{%- endmacro %}

{#- A key's latest change (columns unprefixed) leaves a row: the baseline rule over `staged`. -#}
{% macro dynamodb_leaves_a_row(table, staged) -%}
  {#- An entity's changes are some of its change log's: the newest full export is the log's. -#}
  {%- set staged = dynamodb_staging_relation(table) if dynamodb_entity(table) else staged -%}
  {%- set known = dynamodb_known_full_exports(table) -%}
  {%- if dynamodb_one_full_export() -%}true{%- elif known is not none -%}
not {{ dynamodb_removes_the_row(table, known['newest'] or 0) }}
  {%- else -%}
not {{ dynamodb_removes_the_row(table, 'coalesce((' ~ dynamodb_newest_full_export_sql(staged) ~ '), 0)') }}
  {%- endif -%}
{%- endmacro %}
