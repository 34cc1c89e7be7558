{#-
  A single-table design (decision 0009, ingestion/dynamodb/entities.py): one table entry's change
  log feeds one final table per entity. The entry's `entities` block names the rule and the
  entity values, each with its final table (null: <table>__<value> by the column-name rule);
  <table>__unmatched takes the items no value matches. Every staged row carries `_entity`, the
  final table of its entity, and one struct column per entity holds that entity's typed columns.
-#}

{#- {table, by, value} of an entity's final table `name` (value none: the unmatched table), or
    none for any other name. -#}
{% macro dynamodb_entity(name) -%}
  {%- for table, entry in var('dynamodb_tables', {}).items() if (entry or {}).get('entities') -%}
    {%- set rule = entry['entities'] -%}
    {%- set by = 'key' if rule.get('key') else 'attribute' -%}
    {%- if name == table ~ '__unmatched' -%}{{ return({'table': table, 'by': by, 'value': none}) }}{%- endif -%}
    {%- for value, final in (rule.get('values') or {}).items() -%}
      {%- set derived = dynamodb_column_name(value | string) | trim('_') -%}
      {%- if name == (final or (table ~ '__' ~ (derived or 'entity'))) -%}
        {{ return({'table': table, 'by': by, 'value': value | string}) }}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(none) }}
{%- endmacro %}

{#- The table entry of `name`: its own, or an entity's final table's entry; none otherwise. -#}
{% macro dynamodb_entry(name) -%}
  {%- set tables = var('dynamodb_tables', {}) -%}
  {%- if name in tables -%}{{ return(tables[name] or {}) }}{%- endif -%}
  {%- set entity = dynamodb_entity(name) -%}
  {{ return((tables[entity.table] or {}) if entity else none) }}
{%- endmacro %}

{#- The name of the change log `name`'s rows come from: its own, or its entry's. -#}
{% macro dynamodb_staging_name(name) -%}
  {%- set entity = dynamodb_entity(name) -%}
  {{ return(entity.table if entity else name) }}
{%- endmacro %}

{#-
  The changes of `name` as a relation: its change log, or for an entity's final table the
  entry's change log seen as that entity's: the keys, the entity's struct column expanded (once
  it exists), and the metadata columns. Under a key rule a key never changes entity: its rows
  only. Under an attribute rule every change of the table, and one of another entity (the item
  moved away) or of none (a delete carrying only Keys) is a delete of the key: a delete reaches
  whichever entity table holds the key, and a moved item leaves its old table.
-#}
{% macro dynamodb_change_log(name) -%}
  {%- set entity = dynamodb_entity(name) -%}
  {%- if not entity and name in var('dynamodb_tables', {}) -%}{{ return(source('dynamodb', name)) }}{%- endif -%}
  {%- if not entity -%}
    {#- The model of an entity table no longer in its rule: parseable, refused when it runs. -#}
    {%- if execute -%}
      {{ exceptions.raise_compiler_error(name ~ " is no configured table nor an entity table of a rule"
         ~ " (vars.dynamodb_tables): delete its models, or add its entity value back") }}
    {%- endif -%}
    {{ return(dynamodb_staging_relation(name)) }}
  {%- endif -%}
  {%- set log = source('dynamodb', entity.table) -%}
  {%- set columns = dynamodb_quote_list(dynamodb_key_columns(name)) -%}
  {%- set logged = (adapter.get_columns_in_relation(log) | map(attribute='name') | list) if execute else [] -%}
  {%- if entity.value is not none and name in logged -%}
    {%- do columns.append(dynamodb_quote(name) ~ '.*') -%}
  {%- endif -%}
  {%- set mine = "`_entity` <=> '" ~ name ~ "'" -%}
  {%- if entity.by == 'attribute' -%}
    {#- null: a delete whose record carried only Keys (no image to tell its entity by): a
        delete in every entity table, also a TTL expiry under `ttl_deletes: keep`, which would
        otherwise leave a row of its keys alone in each table that never held the item. -#}
    {%- do columns.append("case when " ~ mine ~ " then `_operation` else 'delete' end as `_operation`") -%}
  {%- else -%}
    {%- do columns.append('`_operation`') -%}
  {%- endif -%}
  {#- The remainder (decision 0012), or the whole item in a change log staged before it (both
      when an append of the older form came after a rebuild moved it to the remainder). -#}
  {%- set kept = ['_image'] if '_image' in logged else [] -%}
  {%- set kept = kept + (['_rest'] if '_rest' in logged or not kept else []) -%}
  {%- for column in ['_version', '_sequence', '_source', '_source_file', '_batch_id', '_ingested_at'] + kept + ['_drift'] -%}
    {%- do columns.append(dynamodb_quote(column)) -%}
  {%- endfor -%}
(select {{ columns | join(', ') }} from {{ log }}{% if entity.by == 'key' %} where {{ mine }}{% endif %})
{%- endmacro %}
