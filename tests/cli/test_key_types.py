"""A key type that contradicts the export (`--partition-key pk:N` for a string key) is refused
from the export's first data lines, before Spark starts: it took a 65 s Spark run to find. Run
where no JVM can start; nothing is staged. (One damaged line among good ones is the ingest's
to report, naming its file: tests/staging/test_ingest.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

from ingestion.cli import main
from ingestion.samples import sample_exports


def test_a_key_type_the_export_contradicts_is_refused_before_spark(
    project_copy: Path, lakehouse_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "catalog"))
    from test_without_spark import no_java

    assert main(["add-table", "invoices", "--partition-key", "invoice_id:N"]) == 0
    items = [{"invoice_id": {"S": f"INV-{n}"}, "total": {"N": str(n)}} for n in range(3)]
    export = sample_exports.write_items_export(tmp_path / "full", "invoices", items)
    done = subprocess.run(
        [sys.executable, "-m", "ingestion.cli", "sync", "--table", "invoices", str(export)],
        cwd=tmp_path,
        env=no_java(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"error: table invoices: key attribute 'invoice_id' is declared N but the data holds S "
        f"(the first 3 line(s) of {export}): check the table's partition_key/sort_key in "
        "dbt_project.yml (nothing staged)"
    ]
    from ingestion.catalog import table_metadata
    from ingestion.config import names

    assert table_metadata.FileReader().read(names.STAGING, "invoices") is None  # nothing staged
