{#-
  The history's merge (incremental strategy `dynamodb_history`), applying the rows the model
  macro dynamodb_history (macros/history.sql) selects: a version already there (the same
  key, `_version` and `_sequence`) gets its new `_valid_to`; any other is inserted. A close (no
  `_version`: _dynamodb_history_in_order) sets the `_valid_to` of its key's current row, and is
  itself no row.
-#}
{% macro get_incremental_dynamodb_history_sql(arg_dict) %}
  {%- set target = arg_dict['target_relation'] -%}
  {%- set source = arg_dict['temp_relation'] -%}
  {%- set unique_key = arg_dict['unique_key'] -%}
  {%- set keys = dynamodb_quote_list([unique_key] if unique_key is string else unique_key) -%}
  {%- do _dynamodb_history_retyped(target, source) -%}
  {%- set name = target.identifier -%}
  {%- set table = dynamodb_table_of(name) -%}
  {%- if dynamodb_entry(table) is not none and dynamodb_new_batches(table, name) | length == 0 -%}
    {{ return(dynamodb_nothing_to_merge()) }}
  {%- endif -%}
  {%- set columns = dynamodb_quote_list(adapter.get_columns_in_relation(source) | map(attribute='name') | list) %}
merge into {{ target }} as target
using {{ source }} as version
on {% for key in keys %}target.{{ key }} = version.{{ key }} and {% endfor -%}
  ((target.`_version` = version.`_version` and target.`_sequence` <=> version.`_sequence`)
    or (version.`_version` is null and target.`_valid_to` is null))
when matched then update set target.`_valid_to` = version.`_valid_to`
when not matched and version.`_version` is not null then insert ({{ columns | join(', ') }})
  values ({% for column in columns %}version.{{ column }}{{ ", " if not loop.last }}{% endfor %})
{% endmacro %}

{#-
  Drift adopted since the history's last merge widened a column of the change log (and the final
  table, which is rebuilt): the history takes the new type too. Its rows are rewritten into the
  new types in one atomic replace of the table (its properties kept), from itself: never from the
  pruned change log. Iceberg's own type promotions (int to bigint, a wider decimal) do not cover a
  bigint becoming a decimal, which drift adoption does.
-#}
{% macro _dynamodb_history_retyped(target, source) %}
  {%- set wanted = {} -%}
  {%- for column in adapter.get_columns_in_relation(source) -%}
    {%- do wanted.update({column.name: column.data_type}) -%}
  {%- endfor -%}
  {%- set present = adapter.get_columns_in_relation(target) -%}
  {%- set changed = present | selectattr('name', 'in', wanted) | rejectattr('name', 'in', ['_valid_from', '_valid_to']) | list -%}
  {%- set changed = changed | selectattr('data_type', 'ne', none) | list -%}
  {%- set retype = [] -%}
  {%- for column in changed if column.data_type != wanted[column.name] -%}
    {%- do retype.append(column.name) -%}
  {%- endfor -%}
  {%- if retype -%}
    {%- set properties = run_query('show tblproperties ' ~ target) -%}
    {%- set kept = [] -%}
    {%- for row in properties.rows if row[0].startswith(('write.', 'format-version', 'commit.')) -%}
      {%- do kept.append("'" ~ row[0] ~ "'='" ~ row[1] ~ "'") -%}
    {%- endfor -%}
    {%- set select -%}
      {%- for column in present -%}
        {%- if column.name in retype -%}cast({{ dynamodb_quote(column.name) }} as {{ wanted[column.name] }}) as {{ dynamodb_quote(column.name) }}
        {%- else -%}{{ dynamodb_quote(column.name) }}{%- endif -%}{{ ", " if not loop.last }}
      {%- endfor -%}
    {%- endset -%}
    {%- do run_query('create or replace table ' ~ target ~ ' using iceberg tblproperties (' ~ (kept | join(', ')) ~ ') as select ' ~ select ~ ' from ' ~ target) -%}
    {%- do log('history ' ~ target ~ ': ' ~ (retype | join(', ')) ~ ' retyped as its change log', info=true) -%}
  {%- endif -%}
{% endmacro %}
