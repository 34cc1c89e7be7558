"""Commands that set the lakehouse up: ``init`` (the embedded catalog), ``add-table`` and
``remove-table``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ingestion.aws import glue
from ingestion.cli.arguments import add_entity_rule_arguments
from ingestion.config import names, settings
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import CADENCES, get_table
from ingestion.jobs import remove
from ingestion.project import onboarding, removal
from ingestion.spark import spark_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="create the embedded catalog and its namespaces")
    p.set_defaults(run=run_init)

    p = sub.add_parser("add-table", help="register a DynamoDB table (configuration + dbt model)")
    p.add_argument(
        "name",
        help="the DynamoDB table's name as DynamoDB spells it (3-255 of a-z A-Z 0-9 _ . -); "
        "its exports and stream files are matched by it",
    )
    p.add_argument(
        "--name",
        dest="lakehouse",
        metavar="LAKEHOUSE_NAME",
        help="the lakehouse name (staging.<name>, lakehouse.<name>, the dbt models; lowercase "
        "a-z 0-9 _, starting with a letter); default: derived from the DynamoDB name by the "
        "column-name rule (App.Users -> app_users)",
    )
    p.add_argument(
        "--partition-key",
        required=True,
        metavar="ATTR:TYPE",
        help="the table's partition key: its attribute name and type, S (string), N (number) "
        "or B (binary), e.g. pk:S",
    )
    p.add_argument(
        "--sort-key",
        metavar="ATTR:TYPE",
        help="the table's sort key, if it has one: ATTR:TYPE with TYPE S, N or B, e.g. sk:S",
    )
    p.add_argument(
        "--buckets",
        type=int,
        metavar="N",
        help="partition the final table by bucket(N, partition key): merges touch only the "
        "buckets their changes hit (only for tables of several GB: at most one bucket per GB; "
        "smaller tables merge faster unbucketed, docs/performance.md)",
    )
    p.add_argument(
        "--cadence",
        choices=list(CADENCES),
        default="daily",
        help="how the rendered deployment keeps it fresh: daily (an incremental export a day; "
        "the default) or stream (its DynamoDB stream, read by the one long-running watch)",
    )
    p.add_argument(
        "--history",
        action="store_true",
        help="also keep every version of every item in lakehouse.<name>__history, queryable "
        "as of any instant (docs/history.md: what it costs)",
    )
    _entity_arguments(p)
    p.set_defaults(run=run_add_table)

    p = sub.add_parser(
        "remove-table",
        help="remove a table and everything it owns (or --reset it to empty); nothing is "
        "deleted without --yes",
    )
    p.add_argument("name", help="the table's lakehouse name or its DynamoDB name")
    p.add_argument(
        "--reset",
        action="store_true",
        help="keep the table's configuration, schema file and dbt models; drop only its data "
        "(staging, rejects and final tables, merge-log rows, lease): the next sync starts from "
        "a full export",
    )
    p.add_argument(
        "--glue-database",
        metavar="DATABASE",
        help="also delete the final table's registration in this AWS Glue database "
        "(register-glue's --database)",
    )
    p.add_argument("--glue-endpoint", metavar="URL", help="the Glue endpoint (default: AWS's)")
    p.add_argument("--yes", action="store_true", help="delete: without it, only list what would go")
    p.set_defaults(run=run_remove_table)


def _entity_arguments(p: argparse.ArgumentParser) -> None:
    """``add-table``'s single-table design: the rule and its entity values."""
    add_entity_rule_arguments(
        p,
        "a single-table design: the entity is the text before the first '#' of this string "
        "key, all of it without one (sk: ORDER#7 is ORDER, PROFILE is PROFILE); one final "
        "table per --entity",
        "a single-table design: the entity is this attribute's value (e.g. type)",
    )
    p.add_argument(
        "--entity",
        action="append",
        metavar="VALUE[=TABLE]",
        help="an entity value and its final table (default <name>__<value>); repeat for each. "
        "Items of no listed value go to <name>__unmatched (docs/single-table-design.md)",
    )


def run_init(args: argparse.Namespace) -> int:
    path = spark_config.init_catalog()
    print(f"catalog ready: {path} (namespaces: {', '.join(names.NAMESPACES)})")
    return 0


def run_add_table(args: argparse.Namespace) -> int:
    name, dynamodb_name = onboarding.names_for(args.name, args.lakehouse)
    written = onboarding.add_table(
        dynamodb_name,
        args.partition_key,
        args.sort_key,
        args.buckets,
        lakehouse=name,
        cadence=args.cadence,
        entities=onboarding.entity_block(args.entity_key, args.entity_attribute, args.entity),
        history=args.history,
    )
    shown = f"DynamoDB table {dynamodb_name} -> lakehouse table {names.FINAL}.{name}"
    rule = get_table(name).entities
    if rule is not None:  # a single-table design: a final table per entity
        finals = ", ".join(f"{names.FINAL}.{f}" for f in rule.finals)
        shown = f"DynamoDB table {dynamodb_name} ({name}) -> entity tables {finals}"
    print(f"{shown} registered" + ("" if name == dynamodb_name else " (--name to choose)"))
    print("wrote:")
    for path in written:
        print(f"  {path.relative_to(settings.project_dir())}")
    print(f"next: ddb-lakehouse sync --table {name} <export-folder>")
    return 0


def run_remove_table(args: argparse.Namespace) -> int:
    table = get_table(args.name)
    # The project's files are planned (and checked) before any data is dropped.
    planned = None if args.reset else removal.plan_removal(table)
    what = "reset to empty" if args.reset else "removed"
    if not args.yes:
        print(
            f"{table.name} would be {what}: its staging, rejects and final tables (and their "
            "files), its merge-log rows and its lease"
            + (", its Glue table" if args.glue_database else "")
        )
        for path in planned.paths if planned else []:
            print(f"  {_shown(path)}")
        print("nothing deleted: run again with --yes")
        return 1
    for item in remove.drop_table_data(table):
        print(f"dropped {item}")
    finals = final_tables(table) if args.glue_database else []  # each entity's table
    histories = [
        f.model_copy(update={"name": names.history_table(f.name)}) for f in finals
    ]  # docs/history.md
    for final in finals + histories:
        if glue.deregister(final, args.glue_database, args.glue_endpoint):
            print(f"deleted Glue table {args.glue_database}.{final.name}")
    for path in removal.apply_removal(planned) if planned else []:
        print(f"  {_shown(path)}")
    print(
        f"{table.name} {what}"
        + ("" if args.reset else f": add-table {table.dynamodb_name} starts clean")
    )
    return 0


def _shown(path: Path) -> Path:
    """A project file as a person finds it: relative to the project, when it is inside."""
    project = settings.project_dir()
    return path.relative_to(project) if path.is_relative_to(project) else path
