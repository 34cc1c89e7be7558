{#-
  A full export re-baselines the table: an item missing from it was deleted before its export
  time. Its version (the export time) is the latest full export version among the new batches
  (or, for a full build, among all staged rows); rows older than it that it does not hold go.
-#}
{% macro dynamodb_baseline_version(table, relation, batches=none) -%}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(run_query(dynamodb_newest_full_export_sql(relation, batches)).columns[0].values()[0]) }}
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
({{ prefix }}`_operation` in {{ dynamodb_delete_operations(table) }}{% if floor is not none %} or ({{ prefix }}`_version` < {{ floor }} and not {{ dynamodb_is_kept_expiry(table, change) }}){% endif %})
{%- endmacro %}

{#- A key's latest change (columns unprefixed) leaves a row: the baseline rule over `staged`. -#}
{% macro dynamodb_leaves_a_row(table, staged) -%}
  {#- An entity's changes are some of its change log's: the newest full export is the log's. -#}
  {%- set staged = dynamodb_staging_relation(table) if dynamodb_entity(table) else staged -%}
  {%- if dynamodb_one_full_export() -%}true{%- else -%}
not {{ dynamodb_removes_the_row(table, 'coalesce((' ~ dynamodb_newest_full_export_sql(staged) ~ '), 0)') }}
  {%- endif -%}
{%- endmacro %}
