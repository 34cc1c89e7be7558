{#-
  dynamodb_final_table: the final table of a DynamoDB table against its change log, every check in
  one query. It fails with one row per check that found something, naming the check and how many
  rows or keys it found:

    - `deleted keys present`: a key whose latest staged change is a delete has a row;
    - `rows missing`: a key whose latest change leaves a row has none;
    - `rows no change leaves`: a row whose key's latest change leaves none (the baseline rule of
      macros/baseline.sql), or whose key has no staged change at all;
    - `rows not at their latest change`: a row whose `_version`/`_sequence` is not its key's latest
      change's;
    - `keys more than once`: a key with more than one row;
    - `null keys`, `null _operation`, `null _version`: on every row of the table.

  It checks in one query what six single tests check (`dynamodb_no_deleted_keys`,
  `dynamodb_rows_match_latest_changes`, `dynamodb_unique` or `dynamodb_unique_combination_of_columns`
  on the keys, `dynamodb_not_null` on the keys, `_operation` and `_version`), each of which reads
  the touched rows again and costs dbt a node of its own. Those stay, for a YAML that lists them;
  `add-table` writes this one.

  Scope (macros/test_scope.sql): after `ddb-lakehouse merge` (`dynamodb_test_batches`), only the
  keys its batches touched. The merge also passes `dynamodb_test_floor`: then only the changes
  and rows as new as the batches' oldest change are read (`_dynamodb_tested_floor`: Iceberg skips
  every older data file by its `_version` bounds, so the read follows the batches, not the
  table). A touched key's latest change is among them, and so is its row after a correct merge;
  a row the MERGE should have replaced and left older is not read then, a guarantee the
  whole-table check of `merge --full-check` and `maintain` keeps (and a `dbt test` given only
  `dynamodb_test_batches`, which reads every row of the touched keys).
  Without the var (a plain `dbt test`) the whole tables. The null checks always read the whole
  table, which costs no data file when Iceberg's null counts prove there is none
  (macros/tests/dynamodb_not_null.sql says how). A first build that copied one full export is
  checked by the two tables' record counts and its keys (dynamodb_copied_full_export).
-#}
{% test dynamodb_final_table(model, table) %}
  {%- set keys = dynamodb_quote_list(dynamodb_key_columns(table)) -%}
  {%- set null_key -%}
    ({% for key in keys %}{{ key }} is null{{ " or " if not loop.last }}{% endfor %})
  {%- endset %}
with nulls as (
  select
    count_if({{ null_key }}) as null_keys,
    count_if(`_operation` is null) as null_operation,
    count_if(`_version` is null) as null_version
  from {{ model }}
  where {{ null_key }} or `_operation` is null or `_version` is null
),
  {%- if dynamodb_copied_full_export(table, model, keys_checked=true) %}
{#- A copy of one full export: no staged change is a delete, each staged row is a row, and the
    rows are at their changes' versions; what is left to prove is one row per key, by the counts
    (Iceberg's record counts: no data is read) and the keys. #}
counts as (
  select
    (select coalesce(sum(record_count), 0) from {{ model }}.files where content = 0) as final_rows,
    (select coalesce(sum(record_count), 0) from {{ dynamodb_staging_relation(table) }}.files where content = 0) as staged_rows
),
checks as (
  select
    0 as deleted_keys_present,
    greatest(staged_rows - final_rows, 0) as rows_missing,
    greatest(final_rows - staged_rows, 0) as rows_no_change_leaves,
    0 as rows_not_at_their_latest_change,
    (select count(*) from (
      select {{ keys | join(', ') }} from {{ model }} group by {{ keys | join(', ') }} having count(*) > 1
    )) as keys_more_than_once
  from counts
)
  {%- else %}
    {%- set log = dynamodb_change_log(table) -%}
    {%- set batches = dynamodb_test_batches(table) -%}
    {%- set floor = _dynamodb_tested_floor(table, log, batches) if dynamodb_run_var('dynamodb_test_floor') else none -%}
    {%- set order_columns = dynamodb_quote_list(dynamodb_change_order_columns()) -%}
    {%- set narrow = (keys + order_columns) | join(', ') %}
{%- if batches is not none %}
touched as (
  select distinct {{ keys | join(', ') }} from {{ log }}
  where {% if batches | length == 0 %}false{% else %}`_batch_id` in ({{ dynamodb_quoted_list(batches) }}){% endif %}
),
{%- endif %}
changes as (
  select {{ narrow }} from {{ log }}
  where true
  {%- if batches is not none %} and ({{ keys | join(', ') }}) in (select * from touched){% endif %}
  {%- if floor is not none %} and `_version` >= {{ floor }}{% endif %}
),
expected as (
  select
    {{ keys | join(', ') }}, `_version`, `_sequence`,
    `_operation` in {{ dynamodb_delete_operations(table) }} as is_delete,
    {{ dynamodb_leaves_a_row(table, log) }} as leaves_a_row
  from ({{ dynamodb_latest_change_per_key('changes', dynamodb_key_columns(table)) }}) as latest
),
final_keys as (
  select {{ keys | join(', ') }}, count(*) as copies,
    max(`_version`) as `_version`, max(`_sequence`) as `_sequence`
  from {{ model }}
  where not {{ null_key }}
  {%- if batches is not none %} and ({{ keys | join(', ') }}) in (select * from touched){% endif %}
  {%- if floor is not none %} and `_version` >= {{ floor }}{% endif %}
  group by {{ keys | join(', ') }}
),
checks as (
  select
    count_if(row.copies is not null and change.is_delete) as deleted_keys_present,
    count_if(row.copies is null and change.leaves_a_row) as rows_missing,
    count_if(row.copies is not null and not coalesce(change.leaves_a_row or change.is_delete, false)) as rows_no_change_leaves,
    count_if(row.copies is not null and change.leaves_a_row
      and not (row.`_version` = change.`_version` and row.`_sequence` <=> change.`_sequence`)) as rows_not_at_their_latest_change,
    count_if(row.copies > 1) as keys_more_than_once
  from final_keys as row
  full outer join expected as change
    on {% for key in keys %}row.{{ key }} = change.{{ key }}{{ " and " if not loop.last }}{% endfor %}
)
  {%- endif %}
select failure, found from (
  select stack(8,
    'deleted keys present', cast(deleted_keys_present as bigint),
    'rows missing', cast(rows_missing as bigint),
    'rows no change leaves', cast(rows_no_change_leaves as bigint),
    'rows not at their latest change', cast(rows_not_at_their_latest_change as bigint),
    'keys more than once', cast(keys_more_than_once as bigint),
    'null keys', cast(null_keys as bigint),
    'null _operation', cast(null_operation as bigint),
    'null _version', cast(null_version as bigint)
  ) as (failure, found)
  from checks cross join nulls
) where found > 0
{% endtest %}

{#- The oldest `_version` of the changes of `batches` (a scoped test: macros/test_scope.sql), or
    none when the test is not scoped, there is nothing to read, or a change has no version (the
    change order puts it first: no bound holds, nothing may be skipped). One aggregate that reads
    the batches' own data files only (Iceberg skips the others by their `_batch_id` bounds). -#}
{% macro _dynamodb_tested_floor(table, log, batches) -%}
  {%- if not execute or not batches -%}{{ return(none) }}{%- endif -%}
  {%- set query -%}
    select if(count_if(`_version` is null) > 0, null, min(`_version`))
    from {{ log }} where `_batch_id` in ({{ dynamodb_quoted_list(batches) }})
  {%- endset -%}
  {%- set found = run_query(query).rows[0][0] -%}
  {{ return(none if found is none else found | int) }}
{%- endmacro %}
