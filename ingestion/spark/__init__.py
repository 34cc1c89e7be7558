"""The Spark side of every job: the target's Spark and Iceberg configuration
(``profiles.yml``) and the one session built from it, the jars, a command as a ``spark-submit``
job, the embedded catalog, and progress on long work."""
