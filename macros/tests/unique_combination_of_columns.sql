{#- Fails with one row per combination of `columns` that occurs more than once. -#}
{% test unique_combination_of_columns(model, combination_of_columns) %}
  {%- if not combination_of_columns -%}
    {{ exceptions.raise_compiler_error("unique_combination_of_columns needs combination_of_columns") }}
  {%- endif -%}
  {%- set quoted = [] -%}
  {%- for column in combination_of_columns -%}{%- do quoted.append(lakehouse_quote(column)) -%}{%- endfor %}
select {{ quoted | join(', ') }}, count(*) as occurrences
from {{ model }}
group by {{ quoted | join(', ') }}
having count(*) > 1
{% endtest %}
