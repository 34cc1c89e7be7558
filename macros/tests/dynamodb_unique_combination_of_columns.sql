{#- Fails with one row per combination of `columns` that occurs more than once. On the final
    table of a DynamoDB table, scoped to the touched keys after a merge (dynamodb_unique.sql says why). -#}
{% test dynamodb_unique_combination_of_columns(model, combination_of_columns) %}
  {%- if not combination_of_columns -%}
    {{ exceptions.raise_compiler_error("dynamodb_unique_combination_of_columns needs combination_of_columns") }}
  {%- endif -%}
  {%- set quoted = dynamodb_quote_list(combination_of_columns) %}
  {%- set table = _dynamodb_final_table(model) %}
select {{ quoted | join(', ') }}, count(*) as occurrences
from {{ model if table is none else dynamodb_tested(table, model, quoted | join(', ')) }}
group by {{ quoted | join(', ') }}
having count(*) > 1
{% endtest %}
