"""dynamodb-lakehouse: DynamoDB exports and streams -> staging Iceberg change logs -> dbt merges."""

from __future__ import annotations

__version__ = "0.1.0"
