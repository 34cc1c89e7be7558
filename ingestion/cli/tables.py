"""Commands that set the lakehouse up: ``init`` (the embedded catalog) and ``add-table``."""

from __future__ import annotations

import argparse

from ingestion.config import names, settings
from ingestion.project import onboarding
from ingestion.spark import spark_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="create the embedded catalog and its namespaces")
    p.set_defaults(run=run_init)

    p = sub.add_parser("add-table", help="register a DynamoDB table (configuration + dbt model)")
    p.add_argument("name")
    p.add_argument("--partition-key", required=True, metavar="ATTR:TYPE")
    p.add_argument("--sort-key", metavar="ATTR:TYPE")
    p.add_argument(
        "--buckets",
        type=int,
        metavar="N",
        help="partition the final table by bucket(N, partition key): merges touch only the "
        "buckets their changes hit (only for tables of several GB: at most one bucket per GB; "
        "smaller tables merge faster unbucketed, docs/performance.md)",
    )
    p.set_defaults(run=run_add_table)


def run_init(args: argparse.Namespace) -> int:
    path = spark_config.init_catalog()
    print(f"catalog ready: {path} (namespaces: {', '.join(names.NAMESPACES)})")
    return 0


def run_add_table(args: argparse.Namespace) -> int:
    written = onboarding.add_table(args.name, args.partition_key, args.sort_key, args.buckets)
    print(f"table {args.name} registered; wrote:")
    for path in written:
        print(f"  {path.relative_to(settings.project_dir())}")
    print(f"next: ddb-lakehouse sync --table {args.name} <export-folder>")
    return 0
