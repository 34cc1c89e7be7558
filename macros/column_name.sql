{#-
  Column name of a DynamoDB attribute; mirrors ingestion/dynamodb/naming.py (a test checks they agree):
  lowercase, runs outside [a-z0-9_] -> '_', leading digit -> leading '_'.
-#}
{% macro dynamodb_column_name(attribute) -%}
  {%- set name = modules.re.sub('[^a-z0-9_]+', '_', attribute | lower) -%}
  {%- if name == '' or name[0] in '0123456789' -%}{%- set name = '_' ~ name -%}{%- endif -%}
  {{ return(name) }}
{%- endmacro %}
