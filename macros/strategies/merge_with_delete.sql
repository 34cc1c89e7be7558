{#-
  Incremental strategy `merge_with_delete`: apply the latest change per key to the final table.

    - a delete (`_operation` 'delete', or 'ttl_delete' unless the table keeps TTL expiries)
      deletes the row, and so does a change older than the newest full export staged (the
      baseline rule, dynamodb_removes_the_row: a late change of an item that export no longer
      holds never brings it back, as a full build would not; a kept TTL expiry is exempt);
    - any other change updates the row or inserts it;
    - the version guard: a change not newer than the row (`_version`, then `_sequence`) is ignored (re-runs and
      exports applied out of order never roll a row back, and re-applying a change rewrites
      nothing); at equal versions a delete still applies (as in the latest-change order);
    - a full export among the merged batches re-baselines the table: a row older than its export
      time that it does not hold is deleted (`when not matched by source`), except a kept TTL
      expiry (`ttl_deletes: keep`): no later export holds an expired item, by definition;
    - pruning: for a table partitioned by bucket(N, partition key) (`buckets: N`), the merge
      condition also holds `lake.system.bucket(N, target.key) in (<the buckets of the changes>)`
      (dynamodb_bucket_function in macros/partition_by.sql, the catalog from vars),
      which Iceberg turns into a partition filter on the target scan: the merge reads and writes
      only the buckets its changes hit. The list is computed from the changes, so it never
      excludes a row the changes match. Not with a re-baseline, which must see every row.
      The changes (latest per key, with their keys' history from the change log) are cached
      first (`cache table`, eager), so the list and the MERGE compute them once: on 5M rows
      that pass was a third of `dbt run`. `ddb-lakehouse merge` clears the cache after `dbt run`.

    - `_inserted_batch_id` (decision 0014): an insert writes the change's `_batch_id` there, an
      update keeps the row's. So the rows a merge's commit wrote tell its inserts from its
      updates, and its counts need no read of the table as it was before
      (ingestion/merge/merge_counts.py). A full build creates the column, null for every row it
      writes (dynamodb_changes_to_merge); a final table without it is refused, naming the
      rebuild that gives it the column.

  dbt-spark's built-in `merge` has no DELETE clause, and dbt-spark validates strategies against a
  fixed list, so its two dispatch points are overridden below to add this one.
-#}
{% macro get_incremental_merge_with_delete_sql(arg_dict) %}
  {%- set target = arg_dict['target_relation'] -%}
  {%- set source = arg_dict['temp_relation'] -%}
  {%- set unique_key = arg_dict['unique_key'] -%}
  {%- set predicates = arg_dict.get('incremental_predicates') or [] -%}
  {%- if not unique_key -%}
    {{ exceptions.raise_compiler_error("merge_with_delete needs unique_key (the table's key columns)") }}
  {%- endif -%}
  {%- set keys = [unique_key] if unique_key is string else unique_key -%}
  {%- set table = target.identifier -%}
  {%- set batches = dynamodb_new_batches(table) if dynamodb_entry(table) is not none else none -%}
  {%- if batches is not none and batches | length == 0 -%}
    {{ return(dynamodb_nothing_to_merge()) }}
  {%- endif -%}
  {%- set columns = adapter.get_columns_in_relation(target) | map(attribute='name') | list -%}
  {%- for required in ['_operation', '_version'] if required not in columns -%}
    {{ exceptions.raise_compiler_error(target ~ " has no " ~ required ~ " column: is it a DynamoDB final table?") }}
  {%- endfor -%}
  {%- set inserted_batch = dynamodb_inserted_batch_column() -%}
  {%- if inserted_batch not in columns -%}
    {{ exceptions.raise_compiler_error(target ~ " has no " ~ inserted_batch ~ " column, which every full build creates:"
       ~ " run `ddb-lakehouse rebuild --table " ~ table ~ "` to build it again") }}
  {%- endif -%}
  {%- set updated = dynamodb_quote_list(columns | reject('equalto', inserted_batch) | list) -%}
  {%- set quoted = dynamodb_quote_list(columns) -%}
  {%- set batches = batches or [] -%}
  {%- set baseline = dynamodb_baseline_version(table, dynamodb_staging_relation(table), batches) if batches else none -%}
  {%- if baseline is none -%}
    {%- set predicates = predicates + _dynamodb_bucket_predicates(table, source, keys[0]) -%}
  {%- endif -%}
  {%- set floor = dynamodb_baseline_version(table, dynamodb_staging_relation(table)) if dynamodb_entry(table) is not none else none -%}
  {%- set removes = dynamodb_removes_the_row(table, floor, 'change') %}
merge into {{ target }} as target
using {{ source }} as change
on {% for key in dynamodb_quote_list(keys) -%}
  target.{{ key }} = change.{{ key }}{{ " and " if not loop.last }}
{%- endfor %}
{%- for predicate in predicates %} and {{ predicate }}{% endfor %}
when matched and {{ removes }} and {{ dynamodb_is_newer('change', 'target', or_equal=true) }} then delete
when matched and not {{ removes }} and {{ dynamodb_is_newer('change', 'target') }} then update set
  {% for column in updated -%}
  target.{{ column }} = change.{{ column }}{{ "," if not loop.last }}
  {% endfor -%}
when not matched and not {{ removes }} then insert ({{ quoted | join(', ') }})
  values ({% for column in columns %}change.{{ dynamodb_quote('_batch_id' if column == inserted_batch else column) }}{{ ", " if not loop.last }}{% endfor %})
{%- if baseline is not none %}
when not matched by source and target.`_version` < {{ baseline }} and not {{ dynamodb_is_kept_expiry(table, 'target') }} then delete
{%- endif %}
{% endmacro %}

{#- The final table's column that names the batch whose change inserted the row (above). -#}
{% macro dynamodb_inserted_batch_column() -%}
  {{ return('_inserted_batch_id') }}
{%- endmacro %}

{#- The bucket filter of a merge into a bucketed table (see above): a list of 0 or 1 predicates. -#}
{% macro _dynamodb_bucket_predicates(table, source, key) -%}
  {%- set buckets = dynamodb_buckets(table) if dynamodb_entry(table) is not none else none -%}
  {%- if not buckets or not execute -%}{{ return([]) }}{%- endif -%}
  {%- do run_query('cache table ' ~ source) -%}
  {%- set query = 'select distinct ' ~ dynamodb_bucket_function(buckets, dynamodb_quote(key)) ~ ' from ' ~ source -%}
  {%- set hit = run_query(query).columns[0].values() | list -%}
  {%- if hit | length == 0 -%}{{ return([]) }}{%- endif -%}
  {{ return([dynamodb_bucket_function(buckets, 'target.' ~ dynamodb_quote(key)) ~ ' in (' ~ (hit | map('int') | sort | join(', ')) ~ ')']) }}
{%- endmacro %}

{#- dbt-spark's validation, with merge_with_delete and dynamodb_history (macros/history_merge.sql) accepted for Iceberg tables. -#}
{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}
  {% if raw_strategy in ('merge_with_delete', 'dynamodb_history') %}
    {% if file_format != 'iceberg' %}
      {% do exceptions.raise_compiler_error(raw_strategy ~ " needs file_format 'iceberg', got " ~ file_format) %}
    {% endif %}
    {% do return(raw_strategy) %}
  {% endif %}
  {% do return(dbt.dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format)) %}
{% endmacro %}

{#- dbt-spark's strategy switch, with merge_with_delete routed to the macro above, dynamodb_history to macros/history_merge.sql. -#}
{% macro dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
  {% if strategy == 'merge_with_delete' %}
    {{ get_incremental_merge_with_delete_sql({
        'target_relation': target, 'temp_relation': source, 'unique_key': unique_key,
        'incremental_predicates': incremental_predicates}) }}
  {% elif strategy == 'dynamodb_history' %}
    {{ get_incremental_dynamodb_history_sql({
        'target_relation': target, 'temp_relation': source, 'unique_key': unique_key}) }}
  {% else %}
    {{ dbt.dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) }}
  {% endif %}
{% endmacro %}

{#- The statement of a merge with no new batch: nothing to read, nothing to commit (an empty MERGE
    would still commit a snapshot). A plain `dbt run` with nothing new then costs its questions
    (the batches, the columns), not a merge; `ddb-lakehouse merge` runs no model at all. -#}
{% macro dynamodb_nothing_to_merge() -%}
select 'nothing new to merge' as dynamodb_lakehouse where false
{%- endmacro %}
