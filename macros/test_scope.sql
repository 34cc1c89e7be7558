{#-
  The final table against its staging change log (run them after a merge: a change staged but not
  merged yet makes them fail, which is what they are for). The latest staged change of every key
  is computed with the model's own rule macros (macros/change_order.sql). The two tests are in
  macros/tests/ (dynamodb_no_deleted_keys, dynamodb_rows_match_latest_changes); this file is their
  scope.

  Scope: `ddb-lakehouse merge` hands over `dynamodb_test_batches: {<table>: [...]}` (as its batches,
  macros/run_var.sql, dynamodb_run_var; `--vars` works too), the
  batches it just merged, and the tests then look only at the keys those batches touched (every
  staged change of those keys, so a late older change still counts): their cost follows the
  merge, not the table. A table absent from the var (a plain `dbt test`, `merge --full-check`,
  `maintain`, a full refresh, or a merge that applied a full export, whose re-baseline touches
  keys it does not hold) is checked whole.
-#}
{% macro dynamodb_test_batches(table) -%}
  {%- set scoped = dynamodb_run_var('dynamodb_test_batches') or {} -%}
  {{ return(scoped[table] if table in scoped else none) }}
{%- endmacro %}

{#- The rows of `relation` whose key a batch of `batches` touched (none at all for []), with
    `columns` only (a SQL select list). -#}
{% macro _dynamodb_touched_rows(table, relation, batches, columns='*') -%}
  {%- set keys = lakehouse_quote_list(dynamodb_key_columns(table)) -%}
  {%- if batches | length == 0 -%}
select {{ columns }} from {{ relation }} where false
  {%- else -%}
select {{ columns }} from {{ relation }}
where ({{ keys | join(', ') }}) in (
    select {{ keys | join(', ') }} from {{ source('dynamodb', table) }}
    where `_batch_id` in ({{ dynamodb_quoted_list(batches) }})
)
  {%- endif -%}
{%- endmacro %}

{#- `relation`, or a subquery of it: its touched rows when the tests are scoped, `columns` only
    when given. -#}
{% macro dynamodb_tested(table, relation, columns=none) -%}
  {%- set batches = dynamodb_test_batches(table) -%}
  {%- if batches is none and columns is none -%}{{ relation }}
  {%- elif batches is none -%}(select {{ columns }} from {{ relation }}) as tested
  {%- else -%}({{ _dynamodb_touched_rows(table, relation, batches, columns or '*') }}) as tested
  {%- endif -%}
{%- endmacro %}

{#- The latest staged change of every tested key, of the columns the tests need only: the keys
    and those of the change order (macros/change_order.sql). Narrow on purpose: the change log's
    other columns (the item's attributes, its raw `_image`) are most of its bytes, and Parquet
    skips a column no one reads. -#}
{% macro dynamodb_expected_latest(table) -%}
  {%- set keys = dynamodb_key_columns(table) -%}
  {%- set columns = lakehouse_quote_list(keys + dynamodb_change_order_columns()) -%}
  {{ dynamodb_latest_change_per_key(dynamodb_tested(table, source('dynamodb', table), columns | join(', ')), keys) }}
{%- endmacro %}

{#-
  True when the final table `model` is the copy the first build of a change log holding one full
  export makes (macros/one_full_export.sql), untouched since. Its change-log tests then need no
  scan: a full export stages `snapshot` rows only, so no key's latest change is a delete; and its
  rows match the latest changes when the two tables hold as many rows (Iceberg's record counts
  of their data files, neither with a delete file), since the key test (`unique`, which still
  reads the keys) proves no key came twice. A first load is tested at the cost of its keys, not
  of two scans and an aggregation of the whole table (bench/export_to_final.py). Never with
  `merge --full-check` or `maintain`, which pass `dynamodb_full_check` and scan.
-#}
{% macro dynamodb_copied_full_export(table, model) -%}
  {%- if not execute or dynamodb_run_var('dynamodb_full_check') -%}{{ return(false) }}{%- endif -%}
  {#- Scoped tests follow an incremental merge: never a first load, and no metadata query. -#}
  {%- if dynamodb_test_batches(table) is not none -%}{{ return(false) }}{%- endif -%}
  {%- if not dynamodb_change_log_is_one_full_export(table) -%}{{ return(false) }}{%- endif -%}
  {%- set query -%}
    select
      (select count(*) from {{ dynamodb_staging_relation(table) }}.files where content != 0),
      (select count(*) from {{ model }}.files where content != 0)
  {%- endset -%}
  {%- set row = run_query(query).rows[0] -%}
  {{ return(row[0] == 0 and row[1] == 0) }}
{%- endmacro %}
