{#-
  A batch whose values do not fit their columns is never merged before its drift is adopted, whoever
  runs the merge. On a table that adopts drift (`adopt_drift`, on by default), `ddb-lakehouse`
  widens the columns from the change log before it merges (ingestion/maintenance/adopt.py); a plain
  `dbt run` that meets such a batch (an ingest whose adoption failed or was killed) would write its
  columns NULL where the item has a value. The guard is a condition on the changes the model reads,
  evaluated row by row inside the merge's own query (a refusal commits nothing); deciding which
  drift it lets through costs one metadata query at compile time (the kept types).

  Drift that adoption keeps NULL by design passes: an attribute whose kept type a person declared,
  at its top or anywhere inside (re-detection keeps a declared type, so the misfit stays, listed in
  `_drift` and whole in `_rest`). A declared entry is one without `dynamodb_types` in the types kept
  with the change log (the property ingestion/catalog/table_types.py writes).
-#}
{% macro dynamodb_drift_guard(table, batches=none) -%}
  {%- set entry = dynamodb_entry(table) or {} -%}
  {%- set kept = _dynamodb_drift_kept(table) if execute and entry.get('adopt_drift', true) is not false else none -%}
  {%- if kept is none -%}
true
  {%- else -%}
    {%- set listed = "cast(array() as array<string>)" if not kept else "array(" ~ dynamodb_quoted_list(kept) ~ ")" -%}
    {%- set misfit = "exists(`_drift`, d -> not array_contains(" ~ listed ~ ", d))" -%}
    {%- set staging = dynamodb_staging_name(table) -%}
    {%- set what = "table " ~ staging ~ ": batch " -%}
    {%- set before = "dynamodb-lakehouse: " ~ what -%}
    {%- set middle = " holds values that do not fit their columns (" -%}
    {%- set after = ") and that drift is not adopted yet: nothing was merged. Run ddb-lakehouse merge --table "
        ~ staging ~ " (it widens the columns, then merges), or declare the types in schemas/" ~ staging
        ~ ".json and run ddb-lakehouse rebuild --table " ~ staging -%}
    {#- A plain `dbt run` asks first, so its refusal is dbt's one line, not a failed Spark task's
        stack; `ddb-lakehouse merge` adopts drift before it merges and skips the question. -#}
    {%- if dynamodb_building() and table not in (dynamodb_run_var('dynamodb_batches') or {}) and not dynamodb_entity(table) -%}
      {%- set found = _dynamodb_unadopted_drift(table, misfit, listed, batches) -%}
      {%- if found is not none -%}
        {{ exceptions.raise_compiler_error(what ~ found[0] ~ middle ~ found[1] ~ after) }}
      {%- endif -%}
    {%- endif -%}
(case when {{ misfit }}
  then raise_error(concat('{{ before }}', `_batch_id`, '{{ middle }}', array_join(`_drift`, ', '), '{{ after }}'))
  else true end)
  {%- endif -%}
{%- endmacro %}

{#- The first staged batch (of `batches`, or of the whole change log) with drift not adopted, as
    (batch, its attributes), or none. It reads two columns of the batches' files. -#}
{% macro _dynamodb_unadopted_drift(table, misfit, listed, batches) -%}
  {%- if batches is not none and batches | length == 0 -%}{{ return(none) }}{%- endif -%}
  {%- set query -%}
select `_batch_id`,
  array_join(array_sort(array_distinct(flatten(collect_list(filter(`_drift`, d -> not array_contains({{ listed }}, d)))))), ', ')
from {{ dynamodb_staging_relation(table) }}
where {{ misfit }}{% if batches is not none %} and `_batch_id` in ({{ dynamodb_quoted_list(batches) }}){% endif %}
group by `_batch_id`
order by `_batch_id`
limit 1
  {%- endset -%}
  {%- set rows = run_query(query).rows -%}
  {{ return([rows[0][0], rows[0][1]] if rows | length > 0 else none) }}
{%- endmacro %}

{#- The attributes whose drift is kept NULL by design (see above), from the kept types. -#}
{% macro _dynamodb_drift_kept(table) -%}
  {#- None where it cannot judge: nothing staged yet, or a table staged by a version that kept no
      types with its change log (its drift is reported by `ddb-lakehouse drift`). -#}
  {%- set staged = adapter.get_relation(database=none, schema=dynamodb_staging_schema(), identifier=dynamodb_staging_name(table)) -%}
  {%- if staged is none -%}{{ return(none) }}{%- endif -%}
  {%- set query -%}
show tblproperties {{ dynamodb_staging_relation(table) }} ('{{ var('lakehouse_schema_property') }}')
  {%- endset -%}
  {%- set found = run_query(query) -%}
  {%- set text = (found.rows[0][1] if found and found.rows | length > 0 else '') | string -%}
  {%- if not text.startswith('{') -%}{{ return(none) }}{%- endif -%}
  {%- set document = fromjson(text) -%}
  {%- set kept = [] -%}
  {%- set sections = [document] + ((document.get('entities') or {}).values() | list) -%}
  {%- for section in sections -%}
    {%- for name, attribute in (section.get('attributes') or {}).items() -%}
      {%- if _dynamodb_declared_within(attribute) and name not in kept -%}{%- do kept.append(name) -%}{%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(kept) }}
{%- endmacro %}

{#- An entry a person declared, itself or one of its fields or elements at any depth. -#}
{% macro _dynamodb_declared_within(entry) -%}
  {%- if entry is not mapping -%}{{ return(false) }}{%- endif -%}
  {%- if 'dynamodb_types' not in entry and not entry.get('key') -%}{{ return(true) }}{%- endif -%}
  {%- for field in (entry.get('fields') or {}).values() -%}
    {%- if _dynamodb_declared_within(field) -%}{{ return(true) }}{%- endif -%}
  {%- endfor -%}
  {{ return(_dynamodb_declared_within(entry.get('element'))) }}
{%- endmacro %}
