"""The project's own files: a table's entry in ``dbt_project.yml`` and its dbt files (staging
source, model, tests) rendered from ``templates/``, written by ``add-table`` and removed by
``remove-table``; and ``doctor``'s checks of the machine the project runs on."""
