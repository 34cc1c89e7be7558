{#-
  A table's history (`history: true`, docs/history.md, decision 0015): `lakehouse.<table>__history`,
  one row per version of each item, with `_valid_from` (the change's `_version`, as a timestamp)
  and `_valid_to` (the next version's `_valid_from`; null while it is current). Intervals are
  half-open, so the rows valid at instant t are those with _valid_from <= t < _valid_to. A delete
  (or TTL expiry) is a row of its own: the item is gone from its `_valid_from` on.

  Built in the same `dbt run` as the final table, from the same new batches. A merge recomputes
  only what its changes can move, per key it touches: its new changes, and the key's history rows
  still valid at or after its oldest new change (the rows a late change lands between). Within a
  key, versions follow dynamodb_change_order(), so two changes of one instant are ordered by
  `_sequence` (the first gets an empty interval: _valid_to = _valid_from).

    - a change already in the history (the same key, `_version` and `_sequence`: a replayed or
      re-merged batch) adds nothing;
    - a full export (`snapshot` lines) that restates an item's values unchanged adds no row (a
      weekly verify export or a heal must not double the history);
    - a full export closes, at its instant, every item it does not hold that was live then (the
      final table's baseline rule): a row `_operation = 'delete'` at the export's `_version`,
      its `_source` and `_batch_id` the export's, its values null. A kept TTL expiry
      (`ttl_deletes: keep`) is not closed, as in the final table.

  The model is never rebuilt (`full_refresh=false`): the change log it reads is pruned by
  `maintain`, so a rebuild would lose versions.
-#}
{% macro dynamodb_history(table, relation) -%}
  {{- dynamodb_staged_first(table) -}}
  {%- set h = _dynamodb_history_plan(table, relation) -%}
  {%- if h.in_order -%}
    {{ _dynamodb_history_in_order(table, h.columns, relation, h.batches, h.guard) }}
  {%- else -%}
with

{{ _dynamodb_history_new_changes(h) }}
{%- if h.snapshots %}{{ _dynamodb_history_exports(h) }}{% endif %}
{%- if h.incremental %}{{ _dynamodb_history_kept(h) }}{% endif %}
{{ _dynamodb_history_versions(h) }}
{%- if h.snapshots %}{{ _dynamodb_history_closes(h) }}{% endif %}
{%- if h.incremental and h.late %}{{ _dynamodb_history_late_closes(h) }}{% endif %}
{{ _dynamodb_history_dated(h) }}
  {%- endif %}
{%- endmacro %}

{#-
  What a history merge works with, decided once (the steps below read it): the change log's
  columns, the new batches, whether a full export is among them (`snapshots`), whether a change
  lands before the newest full export (`late`), and whether the batches all come after every
  version the history holds (`in_order`: the common merge, _dynamodb_history_in_order).
-#}
{% macro _dynamodb_history_plan(table, relation) -%}
  {%- set keys = dynamodb_quote_list(dynamodb_key_columns(table)) -%}
  {%- set staged = adapter.get_relation(database=none, schema=dynamodb_staging_schema(), identifier=dynamodb_staging_name(table)) if execute else none -%}
  {#- An entity table's (a single-table design) are its own view of the entry's change log. -#}
  {%- set entity = dynamodb_entity(table) -%}
  {%- if entity and staged -%}
    {%- set columns = get_columns_in_query('select * from ' ~ dynamodb_change_log(table)) -%}
  {%- else -%}
    {%- set columns = adapter.get_columns_in_relation(staged) | map(attribute='name') | list if staged else [] -%}
  {%- endif -%}
  {%- set incremental = is_incremental() -%}
  {#- The history keeps its own rows in the merge log (macros/merge_log.sql); a full build pins
      the batches it records before it reads. -#}
  {%- set pinned = dynamodb_new_batches(table, this.identifier) -%}
  {%- set batches = pinned if incremental else none -%}
  {#- The newest full export's version, as the final table's merge has it (the baseline rule). A
      batch whose drift is not adopted yet is refused (`guard`) as by the final table's model. -#}
  {%- set known = dynamodb_known_full_exports(table) if incremental else none -%}
  {#- What the new batches hold decides which steps can move anything (_dynamodb_history_probe). -#}
  {%- set probe = _dynamodb_history_probe(staged, this, batches) if incremental and execute else {} -%}
  {%- set floor = (known or {}).get('newest') -%}
  {%- set oldest = probe.get('oldest') -%}
  {#- A full export among the batches, as the ledger knows it (one that held no item has no row). -#}
  {%- set among = (known or {}).get('among_batches') -%}
  {%- set snapshots = probe.get('snapshots', true) or among is not none -%}
  {%- set late = floor is not none and (oldest is none or oldest < floor) -%}
  {#- Under an attribute rule every change of the entry reaches each entity table, one of another
      entity as a delete (dynamodb_change_log): a delete of a key not live here adds no row. -#}
  {%- set foreign_deletes = entity is not none and entity.by == 'attribute' -%}
  {{ return({
      'table': table,
      'relation': relation,
      'keys': keys,
      'columns': columns,
      'quoted': dynamodb_quote_list(columns),
      'value_columns': columns | reject('in', dynamodb_history_metadata_columns() + dynamodb_key_columns(table)) | list,
      'incremental': incremental,
      'batches': batches,
      'guard': dynamodb_drift_guard(table, batches) if not incremental or batches else 'true',
      'order': dynamodb_change_order(),
      'same_version': keys + ['`_version`', "coalesce(`_sequence`, '')"],
      'present': adapter.get_columns_in_relation(this) | map(attribute='name') | list if incremental else [],
      'known': known,
      'floor': floor,
      'oldest': oldest,
      'among': among,
      'snapshots': snapshots,
      'late': late,
      'foreign_deletes': foreign_deletes,
      'in_order': incremental and oldest is not none and probe.get('newest') is not none
          and oldest > probe.get('newest') and not snapshots and not late and not foreign_deletes,
  }) }}
{%- endmacro %}

{#- The keys of `left` equal those of `right` (a join condition). -#}
{% macro _dynamodb_history_same_keys(h, left, right) -%}
  {%- for key in h['keys'] %}{{ left }}.{{ key }} = {{ right }}.{{ key }}{{ " and " if not loop.last }}{% endfor -%}
{%- endmacro %}

{#- The new batches' changes (every change, for a full build). -#}
{% macro _dynamodb_history_new_changes(h) -%}
new_changes as (

    select {{ h.quoted | join(', ') }}
    from {{ h.relation }}
    {%- if h.incremental %}
    where `_batch_id` in ({{ dynamodb_quoted_list(h.batches) if h.batches else "''" }})
      and {{ h.guard }}
    {%- else %}
    where {{ h.guard }}
    {%- endif %}

),
{%- endmacro %}

{#- Each full export among the changes: its version, source and time. -#}
{% macro _dynamodb_history_exports(h) %}

exports as (

    select `_batch_id`, max(`_version`) as `_export_version`, max(`_source`) as `_export_source`,
        max(`_ingested_at`) as `_export_ingested_at`
    from new_changes
    where `_operation` = 'snapshot'
    group by `_batch_id`
    {%- if h.among is not none %}
    {#- a full export that held no item (the table emptied): known by the ledger alone #}
    union all
    select cast(null as string), cast({{ h.among }} as bigint), cast(null as string), current_timestamp()
    where not exists (select 1 from new_changes where `_operation` = 'snapshot' and `_version` = {{ h.among }})
    {%- endif %}

),
{%- endmacro %}

{#- The keys the changes touch, with their oldest change, and their rows a new change can move:
    valid at or after its oldest new change, or at or after the oldest full export among the
    batches (whose close ends the row valid then). -#}
{% macro _dynamodb_history_kept(h) %}

touched as (

    select {{ h['keys'] | join(', ') }}, min(`_version`) as `_oldest`
    from new_changes
    group by {{ h['keys'] | join(', ') }}

),

kept as (

    select {{ _dynamodb_history_rows(h.columns, h.present) }}
    from {{ this }} as history
    inner join touched
        on {{ _dynamodb_history_same_keys(h, 'history', 'touched') }}
    where history.`_valid_to` is null or history.`_valid_to` >= timestamp_micros(
        {%- if h.snapshots %}least(touched.`_oldest`, (select min(`_export_version`) from exports))
        {%- else %}touched.`_oldest`{% endif %})

),
{%- endmacro %}

{#- The candidate rows (new changes, kept rows, and a late change's export lines), one per
    version: a row already in the history wins, else the first staged. -#}
{% macro _dynamodb_history_versions(h) %}
candidates as (

    select {{ h.quoted | join(', ') }}, cast(null as timestamp) as `_old_valid_to`, true as `_new`
    from new_changes
    {%- if h.incremental %}
    union all
    select * from kept
    {%- endif %}
    {%- if h.incremental and h.late %}
    {#- A late change lands before a full export's line of its key that restated the version
        before it (and so added no row): that line is a version again, after the late change. #}
    union all
    select {% for column in h.columns %}export_line.{{ dynamodb_quote(column) }}, {% endfor -%}
        cast(null as timestamp) as `_old_valid_to`, true as `_new`
    from {{ h.relation }} as export_line
    inner join touched
        on {{ _dynamodb_history_same_keys(h, 'export_line', 'touched') }}
    where export_line.`_operation` = 'snapshot' and export_line.`_version` > touched.`_oldest`
      and export_line.`_version` <= {{ h.floor }} and {{ h.guard }}
      and export_line.`_batch_id` not in ({{ dynamodb_quoted_list(h.batches) if h.batches else "''" }})
    {%- endif %}

),

versions as (

    select {{ h.quoted | join(', ') }}, `_old_valid_to`, `_new`
    from (
        select *, row_number() over (
            partition by {{ h.same_version | join(', ') }}
            order by `_new`, `_ingested_at`, `_batch_id`) as `_copy`
        from candidates
    )
    where `_copy` = 1

),
{%- endmacro %}

{#-
  A full export's close rows: per export among the changes, every key whose state just before the
  export was a live row and that the export does not hold. The keys looked at are those this
  merge recomputes and, for a merge of a full export, every other key's rows valid at or after
  the oldest export's instant: the row valid at an export's instant is closed there whatever
  came after it (a lost delete, then the item created again before the export was staged), and
  the rows after it are dated again around the close.
-#}
{% macro _dynamodb_history_closes(h) %}
{%- if h.incremental %}

live_elsewhere as (

    select {{ _dynamodb_history_rows(h.columns, h.present) }}
    from {{ this }} as history
    left anti join touched
        on {{ _dynamodb_history_same_keys(h, 'history', 'touched') }}
    where exists (select 1 from exports)
      and (history.`_valid_to` is null
        or history.`_valid_to` >= timestamp_micros((select min(`_export_version`) from exports)))

),
{%- endif %}

timeline as (

    select * from versions
    {%- if h.incremental %}
    union all
    select * from live_elsewhere
    {%- endif %}

),

before_export as (

    select
        {% for key in h['keys'] %}timeline.{{ key }}, {% endfor -%}
        exports.`_batch_id` as `_export_batch`,
        exports.`_export_version`, exports.`_export_source`, exports.`_export_ingested_at`,
        max_by(struct(timeline.`_operation`, {{ dynamodb_is_kept_expiry(h.table, 'timeline') }} as `_kept`),
            {{ dynamodb_change_order('timeline') }}) as `_state`
    from timeline
    cross join exports
    where timeline.`_version` < exports.`_export_version`
    group by {% for key in h['keys'] %}timeline.{{ key }}, {% endfor %}exports.`_batch_id`,
        exports.`_export_version`, exports.`_export_source`, exports.`_export_ingested_at`

),

closes as (

    select {{ _dynamodb_history_close(h.columns, dynamodb_key_columns(h.table), 'before_export', {
        '_version': 'before_export.`_export_version`', '_source': 'before_export.`_export_source`',
        '_batch_id': 'before_export.`_export_batch`', '_ingested_at': 'before_export.`_export_ingested_at`'}) }}
    from before_export
    left anti join new_changes as held
        on {% for key in h['keys'] %}held.{{ key }} = before_export.{{ key }} and {% endfor -%}
        held.`_batch_id` = before_export.`_export_batch`
    where not (before_export.`_state`.`_operation` in {{ dynamodb_all_delete_operations() }})
      and not before_export.`_state`.`_kept`

),
{%- endmacro %}

{#-
  A late change: a key whose latest version is older than a full export that the change log
  shows did not hold it (no change of the key as new as the export) is closed at the FIRST such
  export after its last change, as the final table's baseline rule removes its row; merged with
  those exports at once, their own closes (above) end it there too.
-#}
{% macro _dynamodb_history_late_closes(h) %}
{%- set exports_known = (h.known or {}).get('all') or [h.floor] -%}
{%- set after = [] -%}
{%- for version in exports_known if h.oldest is none or version > h.oldest -%}{%- do after.append(version) -%}{%- endfor %}

late_closes as (

    select {{ _dynamodb_history_close(h.columns, dynamodb_key_columns(h.table), 'latest', {
        '_version': 'latest.`_close_at`', '_ingested_at': 'current_timestamp()'}) }}
    from (
        select latest.*, array_min(filter(
            array({% for version in exports_known %}cast({{ version }} as bigint){{ ", " if not loop.last }}{% endfor %}),
            e -> e > greatest(latest.`_last`.`_version`, coalesce(held.`_newest`, latest.`_last`.`_version`))
        )) as `_close_at`
        from (
            select {{ h['keys'] | join(', ') }},
                max_by(struct(`_operation`, `_version`, {{ dynamodb_is_kept_expiry(h.table) }} as `_kept`), {{ h.order }}) as `_last`
            from versions
            group by {{ h['keys'] | join(', ') }}
        ) as latest
        left join (
            select {{ h['keys'] | join(', ') }}, max(`_version`) as `_newest` from {{ h.relation }}
            where `_version` >= {{ (after | min) if after else h.floor }}
            group by {{ h['keys'] | join(', ') }}
        ) as held
            on {{ _dynamodb_history_same_keys(h, 'held', 'latest') }}
    ) as latest
    where latest.`_close_at` is not null
      and not (latest.`_last`.`_operation` in {{ dynamodb_all_delete_operations() }})
      and not latest.`_last`.`_kept`

),
{%- endmacro %}

{#- Every version with the closes among them (a close already in the history adds nothing), a
    full export's line that restates the version before it dropped, each row dated by the next
    version of its key; a row of the history that now restates its predecessor is dropped (no
    `_valid_from`). -#}
{% macro _dynamodb_history_dated(h) %}
all_versions as (

    select * from versions
    {%- if h.incremental and h.snapshots %}
    union all
    {# the rows around a close, of a key this merge's changes did not touch #}
    select live_elsewhere.* from live_elsewhere
    left semi join closes
        on {{ _dynamodb_history_same_keys(h, 'closes', 'live_elsewhere') }}
    {%- endif %}
    {%- if h.snapshots %}
    union all
    select closes.* from closes
    {%- if h.incremental %}
    left anti join {{ this }} as history
        on {% for key in h['keys'] %}history.{{ key }} = closes.{{ key }} and {% endfor -%}
        history.`_version` = closes.`_version` and history.`_sequence` is null
    {%- endif %}
    {%- endif %}
    {%- if h.incremental and h.late %}
    union all
    select late_closes.* from late_closes
    left anti join {{ this }} as history
        on {% for key in h['keys'] %}history.{{ key }} = late_closes.{{ key }} and {% endfor -%}
        history.`_version` = late_closes.`_version` and history.`_sequence` is null
    {%- endif %}

),

restated as (
    {%- if not (h.snapshots or h.late or h.foreign_deletes) %}

    select *, false as `_restated` from all_versions
    {%- else %}

    {#- A row already in the history is judged too (its predecessor here is the true one: the
        rows read are every row from the one valid at the oldest new change on, and the first of
        them, whose predecessor is not read, is never judged): a late change that makes an
        export's row restate it, or a close close an item already gone, drops that row, so
        the history is the same whatever grouping the batches were merged in. -#}
    select *,
        coalesce(`_operation` = 'snapshot'
            and lag(`_operation`) over by_key not in {{ dynamodb_all_delete_operations() }}
            and lag(`_values`) over by_key = `_values`, false)
        {#- a close (no sequence, no file) of an item already gone: two exports that lack it, or
            an export's delete line at the export's instant -#}
        or coalesce(`_operation` = 'delete' and `_sequence` is null and `_source_file` is null
            and lag(`_operation`) over by_key in {{ dynamodb_all_delete_operations() }}, false)
        {%- if h.foreign_deletes %}
        {#- a delete of a key this entity table does not hold (another entity's change) -#}
        or (`_new` and `_operation` in {{ dynamodb_all_delete_operations() }}
            and coalesce(lag(`_operation`) over by_key in {{ dynamodb_all_delete_operations() }}, true))
        {%- endif %} as `_restated`
    from (select *, to_json(struct({{ dynamodb_quote_list(h.value_columns) | join(', ') or 'null' }})) as `_values` from all_versions)
    window by_key as (partition by {{ h['keys'] | join(', ') }} order by {{ h.order }})
    {%- endif %}

),

dated as (

    select *,
        timestamp_micros(`_version`) as `_valid_from`,
        lead(timestamp_micros(`_version`)) over by_key as `_valid_to`
    from restated
    where not `_restated`
    window by_key as (partition by {{ h['keys'] | join(', ') }} order by {{ h.order }})

)

select {{ h.quoted | join(', ') }}, `_valid_from`, `_valid_to`
from dated
where `_new` or not (`_valid_to` <=> `_old_valid_to`)
union all
select {{ h.quoted | join(', ') }}, cast(null as timestamp) as `_valid_from`, cast(null as timestamp) as `_valid_to`
from restated
where `_restated` and not `_new`
{%- endmacro %}

{#-
  What a merge's new batches hold, from the change log (`staged`) and the history's file metrics
  (no scan of the history): `oldest`, their oldest change's `_version`; `snapshots`, whether a
  full export is among them; `newest`, the newest `_version` the history holds (an upper bound:
  a file's metrics; none when a data file has none, as its rows could be newer).
-#}
{% macro _dynamodb_history_probe(staged, history, batches) -%}
  {%- set sql -%}
select changes.`_oldest`, changes.`_snapshots`,
    (select if(count_if(readable_metrics.`_version`.upper_bound is null) > 0, null, max(readable_metrics.`_version`.upper_bound))
        from {{ history }}.files where content = 0) as `_newest`
from (
    select min(`_version`) as `_oldest`, coalesce(bool_or(`_operation` = 'snapshot'), false) as `_snapshots`
    from {{ staged }}
    where `_batch_id` in ({{ dynamodb_quoted_list(batches) if batches else "''" }})
) as changes
  {%- endset -%}
  {%- set row = run_query(sql).rows[0] -%}
  {{ return({'oldest': row[0], 'snapshots': row[1], 'newest': row[2]}) }}
{%- endmacro %}

{#-
  The history's rows of new batches that all come after every version it holds, none a full
  export's and none older than the newest full export (the common merge: a stream batch, a daily
  incremental export): their versions, dated among themselves, and one close per key they touch
  (`_version` null, `_valid_to` its first new version), which the history's merge applies to the
  key's current row. No read of the history's rows: nothing older can move.
-#}
{% macro _dynamodb_history_in_order(table, columns, relation, batches, guard) -%}
  {%- set keys = dynamodb_quote_list(dynamodb_key_columns(table)) -%}
  {%- set quoted = dynamodb_quote_list(columns) -%}
  {%- set same_version = keys + ['`_version`', "coalesce(`_sequence`, '')"] -%}
with

versions as (

    select {{ quoted | join(', ') }}
    from (
        select *, row_number() over (
            partition by {{ same_version | join(', ') }} order by `_ingested_at`, `_batch_id`) as `_copy`
        from {{ relation }}
        where `_batch_id` in ({{ dynamodb_quoted_list(batches) if batches else "''" }})
          and {{ guard }}
    )
    where `_copy` = 1

),

dated as (

    select {{ quoted | join(', ') }},
        timestamp_micros(`_version`) as `_valid_from`,
        lead(timestamp_micros(`_version`)) over (
            partition by {{ keys | join(', ') }} order by {{ dynamodb_change_order() }}) as `_valid_to`
    from versions

)

select * from dated
union all
select
  {%- for column in columns %}
    {{ dynamodb_quote(column) if dynamodb_quote(column) in keys else 'null' }} as {{ dynamodb_quote(column) }},
  {%- endfor %}
    null as `_valid_from`, min(`_valid_from`) as `_valid_to`
from dated
group by {{ keys | join(', ') }}
{%- endmacro %}

{#- The select list of rows already in the history (`history`): the change log's `columns` (null
    where the history has none yet: a column drift added), its `_valid_to` kept aside, not new. -#}
{% macro _dynamodb_history_rows(columns, present) -%}
  {%- for column in columns -%}
    {{ ('history.' ~ dynamodb_quote(column)) if column in present else 'null' }} as {{ dynamodb_quote(column) }},
  {% endfor -%}
  history.`_valid_to` as `_old_valid_to`, false as `_new`
{%- endmacro %}

{#- The select list of a close row: the keys from `alias`, `_operation` 'delete', the metadata
    columns in `given` (SQL expressions), every other column null; new. -#}
{% macro _dynamodb_history_close(columns, keys, alias, given) -%}
  {%- for column in columns -%}
    {%- if column in keys -%}{{ alias }}.{{ dynamodb_quote(column) }}
    {%- elif column == '_operation' -%}'delete'
    {%- else -%}{{ given.get(column, 'null') }}
    {%- endif %} as {{ dynamodb_quote(column) }},
  {% endfor -%}
  cast(null as timestamp) as `_old_valid_to`, true as `_new`
{%- endmacro %}

{#- The change log's columns that are no item value: what a restatement's comparison leaves out. -#}
{% macro dynamodb_history_metadata_columns() -%}
  {{ return(['_operation', '_version', '_sequence', '_source', '_source_file', '_batch_id', '_ingested_at', '_drift']) }}
{%- endmacro %}
