{#-
  The final table against its staging change log (run them after a merge: a change staged but not
  merged yet makes them fail, which is what they are for). The latest staged change of every key
  is computed with the model's own rule macros (macros/change_order.sql). The test is
  macros/tests/dynamodb_final_table.sql (and, for a YAML that lists them, the six it replaces,
  beside it); this file is their scope.

  Scope: `ddb-lakehouse merge` hands over `dynamodb_test_batches: {<table>: [...]}` (as its batches,
  macros/run_var.sql, dynamodb_run_var; `--vars` works too), the
  batches it just merged, and the tests then look only at the keys those batches touched (every
  staged change of those keys, so a late older change still counts): their cost follows the
  merge, not the table. A table absent from the var (a plain `dbt test`, `merge --full-check`,
  `maintain`, a full refresh, or a merge that applied a full export, whose re-baseline touches
  keys it does not hold) is checked whole: by a scan, or, for a first load that copied one full
  export and is untouched since, by the record counts (dynamodb_copied_full_export, below).
-#}
{% macro dynamodb_test_batches(table) -%}
  {%- set scoped = dynamodb_run_var('dynamodb_test_batches') or {} -%}
  {{ return(scoped[table] if table in scoped else none) }}
{%- endmacro %}

{#- The rows of `relation` whose key a batch of `batches` touched (none at all for []), with
    `columns` only (a SQL select list). -#}
{% macro _dynamodb_touched_rows(table, relation, batches, columns='*') -%}
  {%- set keys = dynamodb_quote_list(dynamodb_key_columns(table)) -%}
  {%- if batches | length == 0 -%}
select {{ columns }} from {{ relation }} where false
  {%- else -%}
select {{ columns }} from {{ relation }}
where ({{ keys | join(', ') }}) in (
    select {{ keys | join(', ') }} from {{ dynamodb_change_log(table) }}
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
    other columns (the item's attributes) are most of its bytes, and Parquet
    skips a column no one reads. -#}
{% macro dynamodb_expected_latest(table) -%}
  {%- set keys = dynamodb_key_columns(table) -%}
  {%- set columns = dynamodb_quote_list(keys + dynamodb_change_order_columns()) -%}
  {{ dynamodb_latest_change_per_key(dynamodb_tested(table, dynamodb_change_log(table), columns | join(', ')), keys) }}
{%- endmacro %}

{#-
  True when the final table `model` is the copy the first build of a change log holding one full
  export makes (macros/one_full_export.sql), untouched since: the final table has that one
  snapshot (any later write, a delete, an overwrite, an update, a full refresh, adds one) and
  neither table has a delete file. Its change-log tests then need no scan. A full export stages
  `snapshot` rows only, so no key's latest change is a delete. And the copy holds every staged
  row, so its rows match the latest changes (one per key) exactly when the staged keys are
  distinct: when the two tables hold as many rows (Iceberg's record counts) and the keys are
  proven unique, by the caller's own query (`keys_checked`: dynamodb_final_table groups the
  keys) or, for the six tests a YAML may still list, by a key test
  (`dynamodb_unique_combination_of_columns` on the keys, or `dynamodb_unique` on a table's one
  key, run whole, at error severity, in this same `dbt test`). Without either (not declared,
  `severity: warn`, not selected) the tests scan the tables. A first load is
  tested at the cost of its keys, not of two scans and an aggregation of the whole table
  (bench/export_to_final.py). Never with `merge --full-check` or `maintain`, which pass
  `dynamodb_full_check` and scan.
-#}
{% macro dynamodb_copied_full_export(table, model, keys_checked=false) -%}
  {%- if not execute or dynamodb_run_var('dynamodb_full_check') -%}{{ return(false) }}{%- endif -%}
  {#- Scoped tests follow an incremental merge: never a first load, and no metadata query. -#}
  {%- if dynamodb_test_batches(table) is not none -%}{{ return(false) }}{%- endif -%}
  {%- if dynamodb_entity(table) -%}{{ return(false) }}{%- endif -%}
  {#- The keys proven unique: by the caller's own query (`keys_checked`: dynamodb_final_table),
      or by a key test in the same `dbt test`. -#}
  {%- if not keys_checked and not _dynamodb_key_test_runs(table) -%}{{ return(false) }}{%- endif -%}
  {%- if not dynamodb_change_log_is_one_full_export(table) -%}{{ return(false) }}{%- endif -%}
  {%- set query -%}
    select
      (select count(*) from {{ dynamodb_staging_relation(table) }}.files where content != 0),
      (select count(*) from {{ model }}.files where content != 0),
      (select count(*) from {{ model }}.snapshots)
  {%- endset -%}
  {%- set row = run_query(query).rows[0] -%}
  {{ return(row[0] == 0 and row[1] == 0 and row[2] == 1) }}
{%- endmacro %}

{#- True when this `dbt test` runs, at error severity, a test that the keys of the final table of
    `table` are unique: `dynamodb_unique_combination_of_columns` on exactly its key columns, or
    `dynamodb_unique` on its one key column. -#}
{% macro _dynamodb_key_test_runs(table) -%}
  {%- set keys = dynamodb_key_columns(table) | map('lower') | sort | list -%}
  {%- for node_id in selected_resources -%}
    {%- set node = graph.nodes.get(node_id) -%}
    {%- if node is not none and node.resource_type == 'test' and node.test_metadata -%}
      {%- set owner = graph.nodes.get(node.attached_node) if node.attached_node else none -%}
      {%- set kwargs = node.test_metadata.kwargs or {} -%}
      {%- set name = node.test_metadata.name -%}
      {%- set columns = (kwargs.get('combination_of_columns') or []) if name == 'dynamodb_unique_combination_of_columns'
          else ([kwargs.get('column_name')] if name == 'dynamodb_unique' else []) -%}
      {%- if owner is not none and owner.resource_type == 'model' and owner.name == table
          and (node.config.severity | lower) == 'error'
          and (columns | map('lower') | sort | list) == keys -%}
        {{ return(true) }}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{%- endmacro %}
