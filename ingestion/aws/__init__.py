"""The AWS control plane beyond exports: Glue registration of the final tables, the EMR job
(packaging, submission, waiting), ``doctor --aws`` and the CloudFormation deployment, its
requests checked offline against botocore's service models."""
