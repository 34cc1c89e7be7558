{#- Identifier quoting for Spark SQL: backticks, embedded backticks doubled. Kept although the
    project's own names are [a-z0-9_]: a column is named for its DynamoDB attribute, and an
    attribute name may hold any character (docs/tables-and-types.md, column names). -#}
{% macro dynamodb_quote(identifier) -%}
  `{{ identifier | replace('`', '``') }}`
{%- endmacro %}

{#- Each identifier of `identifiers` quoted (dynamodb_quote), as a list. -#}
{% macro dynamodb_quote_list(identifiers) -%}
  {%- set quoted = [] -%}
  {%- for identifier in identifiers -%}{%- do quoted.append(dynamodb_quote(identifier)) -%}{%- endfor -%}
  {{ return(quoted) }}
{%- endmacro %}

{#- String literals of `values`, comma-separated, for an `in (...)` list (batch ids). -#}
{% macro dynamodb_quoted_list(values) -%}
  {%- for value in values -%}'{{ value | replace("\\", "\\\\") | replace("'", "\\'") }}'{{ ", " if not loop.last }}{%- endfor -%}
{%- endmacro %}
