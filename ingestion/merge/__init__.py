"""Staging change logs -> final tables: ``dbt run`` + ``dbt test`` of the tables' models
(``merge_with_delete``) in the process's own Spark session, what its tests read, what each
merge changed, and the full-refresh decision."""
