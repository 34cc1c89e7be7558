{#-
  Which staged changes a merge applies, decided by COMMIT ORDER, never by a timestamp column.

  The new batches are the ledger's batches (the staging table's snapshot summaries) that the merge
  log (dynamodb_merge_log()) does not hold yet. `ddb-lakehouse merge` computes them, hands them
  over in the environment (dynamodb_run_var, macros/run_var.sql) and records them in the merge log after dbt
  succeeds; a plain `dbt run` computes the same list itself, once (macros/new_batches.sql), and
  the model's post-hook records it (macros/merge_log.sql).

  A merge reads the new batches' changes and, of the older history, only the DELETE MARKERS of the
  keys they touch: the staged deletes of those keys (its change log keeps a key's latest change,
  see ingestion/maintenance/expiry.py, so a delete that ended an item stays). A new change older than a marker of
  its key is dropped: a late or replayed older change never brings a deleted item back. Any other
  older change is already in the final row, which the version guard of merge_with_delete compares
  against; and a change older than the newest full export obeys the baseline rule there. So the
  merge reads what changed, not the whole change log: the marker scan asks Iceberg for
  `_operation in (deletes)`, and the files of a full export (all `snapshot`) are skipped by their
  column bounds without being opened.
-#}

{% macro dynamodb_changes_to_merge(table, relation) -%}
  {{- dynamodb_staged_first(table) -}}
  {%- set keys = dynamodb_quote_list(dynamodb_key_columns(table)) -%}
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
  and {{ dynamodb_drift_guard(table, batches) }}
    {%- endif -%}
  {%- else -%}
    {#- A full build reads every change; the batches are pinned first, before it reads, for a
        plain `dbt run` to record (macros/merge_log.sql): a batch committed after the pin is
        built in and merged again next time, which changes nothing. It creates the final
        table's `_inserted_batch_id` (decision 0014), null for every row it writes: the
        incremental merges fill it (merge_with_delete). -#}
    {%- do dynamodb_new_batches(table) %}
select *, cast(null as string) as {{ dynamodb_quote(dynamodb_inserted_batch_column()) }}
from {{ relation }} where {{ dynamodb_drift_guard(table) }}
  {%- endif -%}
{%- endmacro %}
