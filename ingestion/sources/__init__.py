"""What AWS writes to S3 and how it is read, without Spark: export folders through their
manifests, export requests and their windows, ``s3://`` locations, AWS's refusals as errors of the
family, and the Lambda function that writes a stream's change files (deployable alone)."""
