{#-
  Which staged changes a merge applies, decided by COMMIT ORDER, never by a timestamp column.

  The new batches are the ledger's batches (the staging table's snapshot summaries) that the merge
  log (dynamodb_merge_log()) does not hold yet. `ddb-lakehouse merge` computes them, hands them
  over in the environment (dynamodb_run_var, below) and records them in the merge log after dbt
  succeeds; a plain `dbt run` computes the same list itself (and re-applies it on the next run:
  harmless, see below).

  A merge reads the new batches' changes and, of the older history, only the DELETE MARKERS of the
  keys they touch: the staged deletes of those keys (its change log keeps a key's latest change,
  see lake/expiry.py, so a delete that ended an item stays). A new change older than a marker of
  its key is dropped: a late or replayed older change never brings a deleted item back. Any other
  older change is already in the final row, which the version guard of merge_with_delete compares
  against; and a change older than the newest full export obeys the baseline rule there. So the
  merge reads what changed, not the whole change log: the marker scan asks Iceberg for
  `_operation in (deletes)`, and the files of a full export (all `snapshot`) are skipped by their
  column bounds without being opened.
-#}

{#-
  A value `ddb-lakehouse merge` passes to one dbt command: `--vars` when given (a person's
  `dbt run --vars ...`), else the JSON object in DYNAMODB_LAKEHOUSE_RUN, which the merge sets for
  the command's duration. Why not `--vars`: new vars make dbt parse the whole project again, twice
  a merge (bench/dbt_fixed_cost.py: 1.42 s against 0.15 s); a variable of the environment read
  only while executing (never while parsing) keeps partial parsing valid.
-#}
{% macro dynamodb_run_var(name) -%}
  {%- set given = var(name, none) -%}
  {%- if given is not none or not execute -%}{{ return(given) }}{%- endif -%}
  {{ return(fromjson(env_var('DYNAMODB_LAKEHOUSE_RUN', '{}')).get(name)) }}
{%- endmacro %}

{% macro dynamodb_new_batches(table) -%}
  {%- set given = dynamodb_run_var('dynamodb_batches') or {} -%}
  {%- if table in given -%}{{ return(given[table]) }}{%- endif -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set logged = adapter.get_relation(database=none, schema=var('lakehouse_staging_schema'), identifier=var('lakehouse_merge_log')) -%}
  {#- A batch's id is in its commit's summary or, once `maintain` expired that commit, in the
      ledger a later commit carries forward (`dynamodb-lakehouse.ledger`, a JSON list). -#}
  {%- set query -%}
    select distinct batch_id from (
      select summary['dynamodb-lakehouse.batch-id'] as batch_id
      from {{ dynamodb_staging_relation(table) }}.snapshots
      union all
      select carried.batch_id
      from {{ dynamodb_staging_relation(table) }}.snapshots
      lateral view explode(
        from_json(summary['dynamodb-lakehouse.ledger'], 'array<struct<batch_id:string>>')) as carried
    ) as batches
    where batch_id is not null and batch_id != ''
    {%- if logged %}
      and batch_id not in (
        select batch_id from {{ dynamodb_merge_log() }} where table_name = '{{ table }}')
    {%- endif %}
  {%- endset -%}
  {{ return(run_query(query).columns[0].values() | list) }}
{%- endmacro %}

{% macro dynamodb_quoted_list(values) -%}
  {%- for value in values -%}'{{ value | replace("\\", "\\\\") | replace("'", "\\'") }}'{{ ", " if not loop.last }}{%- endfor -%}
{%- endmacro %}

{% macro dynamodb_changes_to_merge(table, relation) -%}
  {%- set keys = [] -%}
  {%- for key in dynamodb_key_columns(table) -%}{%- do keys.append(lakehouse_quote(key)) -%}{%- endfor -%}
  {%- if is_incremental() -%}
    {%- set batches = dynamodb_new_batches(table) -%}
    {%- if batches | length == 0 %}
select * from {{ relation }} where false
    {%- else %}
select change.* from {{ relation }} as change
left anti join (
    select {{ keys | join(', ') }}, {{ dynamodb_change_order() }} as `_marker_order`
    from {{ relation }}
    where `_operation` in {{ dynamodb_delete_operations(table) }}
      and ({{ keys | join(', ') }}) in (
        select {{ keys | join(', ') }} from {{ relation }}
        where `_batch_id` in ({{ dynamodb_quoted_list(batches) }})
      )
) as marker
  on {% for key in keys %}marker.{{ key }} = change.{{ key }} and {% endfor -%}
  marker.`_marker_order` > {{ dynamodb_change_order('change') }}
where change.`_batch_id` in ({{ dynamodb_quoted_list(batches) }})
    {%- endif -%}
  {%- else %}
select * from {{ relation }}
  {%- endif -%}
{%- endmacro %}

{#-
  A full export re-baselines the table: an item missing from it was deleted before its export
  time. Its version (the export time) is the latest full export version among the new batches
  (or, for a full build, among all staged rows); rows older than it that it does not hold go.
-#}
{% macro dynamodb_baseline_version(table, relation, batches=none) -%}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(run_query(dynamodb_newest_full_export_sql(relation, batches)).columns[0].values()[0]) }}
{%- endmacro %}
