"""What AWS writes to S3, and how it is read; no Spark here.

- ``s3_uri``: the one parser of ``s3://BUCKET/KEY`` (standard library only);
- ``locations``: ``s3://`` paths with the part of ``pathlib`` an export reader needs (boto3);
- ``manifest``: an export folder through its manifests (full or incremental, checksums);
- ``export_control``: ``ExportTableToPointInTime`` requests, windows, waiting (boto3); verify's
  own export prefix;
- ``recovery``: whether a chain of exports can continue (point-in-time recovery's window);
- ``aws_errors``: an AWS refusal as one line of the error family;
- ``stream_writer``: the Lambda function on a table's stream (deployable alone);
- ``stream_files``: the change files it writes, listed and deleted.

May import: ``ingestion.config``, ``ingestion.fault_points``.
"""
