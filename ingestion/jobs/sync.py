"""``sync`` and ``export``: what the ledger lacks exported from DynamoDB (or given as folders,
or a stream's change files), staged, then merged into the final table; a broken chain of
exports healed with a full export (``--heal``); ``verify``'s own export, and its ``--repair``
(a full export staged as a re-baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ingestion.catalog import ledger
from ingestion.dynamodb.tables import TableConfig, TableConfigError
from ingestion.jobs import apply, stage
from ingestion.jobs.reporter import Reporter
from ingestion.maintenance import verify as verifying
from ingestion.merge import dbt_process
from ingestion.sources import export_control, manifest, recovery
from ingestion.spark import spark_config
from ingestion.staging import chain


@dataclass(frozen=True)
class ExportTarget:
    """Where DynamoDB exports from and to; ``None`` takes the table's configuration."""

    table_arn: str | None = None
    to: str | None = None
    poll: float = 30.0


@dataclass(frozen=True)
class Exported:
    """The folders DynamoDB exported to (s3://...), in order; ``healed``: why the chain could
    not continue, when a full export was taken instead (``--heal``)."""

    folders: list[str]
    healed: str | None = None


def _arn_and_destination(table: TableConfig, target: ExportTarget) -> tuple[str, str]:
    table_arn = target.table_arn or table.table_arn
    destination = target.to or table.export_to
    if not table_arn or not destination:
        raise TableConfigError(
            f"table {table.name}: exporting needs its table ARN and an s3:// destination "
            "(table_arn / export_to in dbt_project.yml, or --table-arn / --to)"
        )
    return table_arn, destination


def export_from_dynamodb(
    table: TableConfig,
    target: ExportTarget,
    kind: str | None,
    reporter: Reporter,
    heal: bool = False,
) -> Exported:
    """Run the DynamoDB exports the ledger calls for (``kind``, or full when the ledger is empty
    and incremental after). When no incremental export can continue the chain
    (``sources.recovery.chain_break``), refuse naming the command that heals; with ``heal`` (or
    the table's ``heal: true``) take a full export instead."""
    table_arn, destination = _arn_and_destination(table, target)
    spark = spark_config.build_spark(f"export {table.name}")
    last_end = chain.last_export_end(ledger.entries(spark, table.name))
    client = dynamodb_client(table_arn)
    kind_given = kind  # `export --incremental` asks for one: the table's heal: true is sync's
    kind = kind or (manifest.INCREMENTAL if last_end else manifest.FULL)
    broken = None
    if kind == manifest.INCREMENTAL and last_end is not None:
        broken = recovery.chain_break(client, table_arn, last_end)
    if broken and not (heal or (table.heal and kind_given is None)):
        raise chain.ChainError(
            f"{table.name}: the chain of exports cannot continue: {broken}. Heal it with a full "
            f"export now, staged as a re-baseline: ddb-lakehouse sync --table {table.name} "
            "--from-dynamodb --heal (or heal: true in the table's entry)"
        )
    if broken:
        reporter.line(f"{table.name}: the chain of exports cannot continue: {broken}; healing")
        kind = manifest.FULL
    folders = export_control.run_exports(
        client, table_arn, destination, kind, last_end, target.poll, report=reporter.line
    )
    if not folders:
        reporter.line(
            f"{table.name}: up to date (less than 15 minutes since {last_end}): nothing to export"
        )
    return Exported(folders, broken)


def verify_export(table: TableConfig, target: ExportTarget, reporter: Reporter) -> str:
    """A full export now, under verify's own prefix (``export_control.VERIFY_PREFIX``): never
    staged by ``sync``, never in the way of its exports. Its folder."""
    table_arn, destination = _arn_and_destination(table, target)
    (folder,) = export_control.run_exports(
        dynamodb_client(table_arn),
        table_arn,
        export_control.verify_destination(destination),
        manifest.FULL,
        None,
        target.poll,
        report=reporter.line,
    )
    return folder


def dynamodb_client(table_arn: str) -> Any:
    """A DynamoDB client in the table's own region, taken from its ARN: a job on EMR has no
    ``AWS_REGION`` unless someone sets it, and a bare client then fails with NoRegionError."""
    import boto3

    return boto3.client("dynamodb", region_name=region_of(table_arn))


def region_of(arn: str) -> str:
    """The region of an ARN (``arn:PARTITION:SERVICE:REGION:ACCOUNT:...``)."""
    parts = arn.split(":")
    if len(parts) < 6 or parts[0] != "arn" or not parts[3]:
        raise TableConfigError(
            f"{arn!r} is not a DynamoDB table ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)"
        )
    return parts[3]


def export(
    table: TableConfig, target: ExportTarget, full: bool, ingest: bool, reporter: Reporter
) -> bool:
    """``export``: one full export, or the incrementals since the last applied one; staged and
    merged unless ``ingest`` is False. False when a staged count differs from its manifest's."""
    kind = manifest.FULL if full else manifest.INCREMENTAL
    folders = export_from_dynamodb(table, target, kind, reporter).folders
    for folder in folders:
        reporter.line(f"exported: {folder}")
    if folders and ingest:
        staged = stage.stage_exports(table, folders, reporter)
        if not staged.complete:
            return False
        apply.merge_tables([table], reporter, known_clean={table.name: staged.clean})
    return True


def sync(
    table: TableConfig,
    reporter: Reporter,
    folders: list[str] | None = None,
    stream: stage.StreamSource | None = None,
    target: ExportTarget | None = None,
    allow_gap: bool = False,
    heal: bool = False,
) -> bool:
    """Stage one kind of source (export folders, a stream, or what DynamoDB exports now when
    ``target`` is given), then merge. False when a staged count differs from its manifest's
    (nothing is merged then). ``heal``: see ``export_from_dynamodb``; the keys the break
    changed are reported (the final table against the new export, before it is staged)."""
    given = sum(bool(x) for x in (folders, stream, target))
    if given == 0:
        raise TableConfigError(
            "nothing to sync: give export folders, --stream LOCATION or --from-dynamodb"
        )
    if given > 1:
        raise TableConfigError("give export folders, --stream or --from-dynamodb, not both")
    dbt_process.load_dbt_meanwhile()  # while the sources are staged: the merge after needs it
    changed = None
    clean: frozenset[str] = frozenset()
    if stream is not None:
        stage.stage_stream(table, stream, reporter)
    else:
        healed = None  # why the chain could not continue, when healed
        if target is not None:
            exported = export_from_dynamodb(table, target, None, reporter, heal)
            folders, healed = exported.folders, exported.healed
            if not folders:
                return True
        assert folders
        if healed:
            changed = f"healed with the full export {folders[0]}: {keys_changed(table, folders[0])}"
        staged = stage.stage_exports(table, folders, reporter, allow_gap)
        if not staged.complete:
            return False
        clean = staged.clean
    apply.merge_tables([table], reporter, known_clean={table.name: clean})
    if changed is not None:
        reporter.line(f"{table.name}: {changed}")
    return True


def keys_changed(table: TableConfig, folder: str) -> str:
    """What staging the full export in ``folder`` changes in the final table, as a line: the
    keys it inserts, deletes and updates (``maintenance.verify``, not recorded as a verify run)."""
    spark = spark_config.build_spark(f"verify {table.name}")
    try:
        report = verifying.verify(spark, table, folder, record=False)
    except verifying.VerifyError as exc:
        return f"the keys it changed are not known ({exc})"
    return changed_keys_line(report)


def changed_keys_line(report: verifying.VerifyReport) -> str:
    parts = [
        f"{report.counts[outcome]} key(s) {verb}"
        + (f" (first: {'; '.join(report.first[outcome][:3])})" if report.first[outcome] else "")
        for outcome, verb in (
            ("missing", "inserted"),
            ("extra", "deleted"),
            ("different", "updated"),
        )
    ]
    return ", ".join(parts)


def check_repairable(table: TableConfig, folder: str) -> None:
    """Refuse, before any work, an export ``verify --repair`` could not stage
    (``staging.chain.check_rebaseline``)."""
    export = manifest.read_export(folder, verify=False)
    chain.check_stageable(table, export, rebaseline=True)
    spark = spark_config.build_spark(f"verify {table.name}")
    chain.check_rebaseline(ledger.entries(spark, table.name), export, table.name)


def repair(
    table: TableConfig, before: verifying.VerifyReport, reporter: Reporter
) -> verifying.VerifyReport:
    """``verify --repair``: the export ``before`` verified staged as a re-baseline and merged;
    the final table verified against it again (the report returned)."""
    reporter.line(f"{table.name}: repairing: {changed_keys_line(before)}")
    if not stage.stage_exports(table, [before.export], reporter, rebaseline=True).complete:
        raise verifying.VerifyError(
            f"{before.export}: its staged count differs from its manifest's: nothing merged"
        )
    apply.merge_tables([table], reporter)
    return verifying.verify(spark_config.build_spark(f"verify {table.name}"), table, before.export)
