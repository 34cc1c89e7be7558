{#-
  The history's merge (incremental strategy `dynamodb_history`), applying the rows the model
  macro dynamodb_history (macros/history.sql) selects: a version already there (the same
  key, `_version` and `_sequence`) gets its new `_valid_to`, or is deleted when the row comes
  without `_valid_from` (it now restates its predecessor); any other is inserted. A close (no
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
when matched and version.`_version` is not null and version.`_valid_from` is null then delete
when matched then update set target.`_valid_to` = version.`_valid_to`
when not matched and version.`_valid_from` is not null then insert ({{ columns | join(', ') }})
  values ({% for column in columns %}version.{{ column }}{{ ", " if not loop.last }}{% endfor %})
{% endmacro %}

{#-
  Drift adopted since the history's last merge changed a column's type in the change log (and
  the final table, which is rebuilt from it). The history cannot be rebuilt (its change log is
  pruned) and a cast would change values (`1.5` as text is `1.50`, a map as text is not its
  JSON, binary as text is raw bytes): `ddb-lakehouse merge` re-derives every version from its
  own item before it merges (ingestion/merge/history_types.py). A plain `dbt run` that meets a
  history of older types refuses, and merges nothing into it.
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
    {%- set table = dynamodb_table_of(target.identifier) -%}
    {{ exceptions.raise_compiler_error("history " ~ target.identifier ~ ": its columns " ~ (retype | join(', '))
       ~ " have older types than its change log (drift adopted): nothing was merged into it."
       ~ " Run ddb-lakehouse merge --table " ~ table ~ ", which re-derives its versions in the new types"
       ~ " before it merges (a cast would change values)") }}
  {%- endif -%}
{% endmacro %}
