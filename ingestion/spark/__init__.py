"""The Spark side of every job: the target's Spark and Iceberg configuration
(``profiles.yml``) and the one session built from it, the jars, a command as a ``spark-submit``
job, the embedded catalog, a table's Iceberg metadata, and progress on long work."""
