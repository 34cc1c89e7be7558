"""Deep items through the CLI, as a user with a table of their own meets them (issue "deep items"):
lists of maps nested 1 to 10 deep, a list of 500 maps, a map of 200 keys and sets inside a list,
in one table with history. The exports are written by `write-export` from JSON Lines; a first
load, an incremental export whose changes widen the decimal at the deepest level of every shape
(drift adoption), `verify` (equal), `verify --repair`, `rebuild` and the history as of the first
export, each within the test session's 1 GB driver (half the profile's default). Every expression
over a nested value is linear in its type's size (tests/schema/test_expression_sizes.py); before,
`verify` of three list levels ran out of a 2 GB heap."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ingestion.cli import main
from ingestion.samples import deep_items

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DEPTHS = range(1, 11)
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def written(capsys) -> str:
    """The folder `write-export` printed."""
    out = capsys.readouterr().out
    return next(
        line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("export written: ")
    )


def export(capsys, tmp_path: Path, name: str, *args: str) -> str:
    out = tmp_path / "exports"
    assert (
        main(
            ["write-export", "--table", "Deep", "--partition-key", "id:S", "--out", str(out), *args]
        )
        == 0
    )
    return written(capsys)


def scalar(spark, sql: str) -> Any:
    return spark.sql(sql).first()[0]


def test_deep_items_load_adopt_verify_repair_rebuild_and_keep_their_history(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys
) -> None:
    items = [deep_items.item(i, DEPTHS) for i in range(4)]
    full = export(
        capsys,
        tmp_path,
        "full",
        "--items",
        str(jsonl(tmp_path / "items.jsonl", items)),
        "--at",
        T0.isoformat(),
    )
    assert main(["add-table", "Deep", "--partition-key", "id:S", "--history"]) == 0
    assert main(["sync", "--table", "deep", full]) == 0
    capsys.readouterr()

    # The changes: every item's deepest decimals widened, one item deleted, one added.
    changed = [deep_items.widened(found, DEPTHS) for found in items[:3]]
    new = deep_items.item(9, DEPTHS)
    changes = [
        {"Keys": {"id": c["id"]}, "OldImage": o, "NewImage": c}
        for o, c in zip(items, changed, strict=False)
    ]
    changes += [{"Keys": {"id": items[3]["id"]}, "OldImage": items[3]}]
    changes += [{"Keys": {"id": new["id"]}, "NewImage": new}]
    window = ["--from", T0.isoformat(), "--to", (T0 + timedelta(hours=1)).isoformat()]
    incremental = export(
        capsys,
        tmp_path,
        "inc",
        "--changes",
        str(jsonl(tmp_path / "changes.jsonl", changes)),
        *window,
    )
    assert main(["sync", "--table", "deep", incremental]) == 0
    out = capsys.readouterr().out
    assert "drift adopted" in out, out

    # Every widened value exact in its typed column: the deepest typed level of d2, the long
    # list's last element, the wide map, the set inside the list.
    deepest = scalar(spark, "select d2[0].child[0].price from lake.lakehouse.deep where id = 'i0'")
    assert deepest == Decimal("1.123456")
    assert scalar(spark, "select long[499].p from lake.lakehouse.deep where id = 'i1'") == Decimal(
        "0.125"
    )
    assert scalar(spark, "select wide.k199 from lake.lakehouse.deep where id = 'i2'") == Decimal(
        "7.25"
    )
    assert scalar(spark, "select count(*) from lake.lakehouse.deep") == 4

    # The table against a full export of what the items are now: equal, value by value.
    expected = [*changed, new]
    later = (T0 + timedelta(hours=2)).isoformat()
    now = export(
        capsys,
        tmp_path,
        "now",
        "--items",
        str(jsonl(tmp_path / "now.jsonl", expected)),
        "--at",
        later,
    )
    assert main(["verify", "--table", "deep", now]) == 0, capsys.readouterr()
    assert "EQUAL" in capsys.readouterr().out

    # A row lost from the final table: verify says so; --repair restores it from the export.
    spark.sql("delete from lake.lakehouse.deep where id = 'i1'")
    assert main(["verify", "--table", "deep", now]) == 1
    capsys.readouterr()
    assert main(["verify", "--table", "deep", now, "--repair"]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert main(["verify", "--table", "deep", now]) == 0

    # Rebuilt from the change log: the same table.
    assert main(["rebuild", "--table", "deep"]) == 0
    capsys.readouterr()
    assert main(["verify", "--table", "deep", now]) == 0
    capsys.readouterr()

    # The history as of the first export holds the items as they were then, value by value.
    assert main(["verify", "--table", "deep", full, "--as-of"]) == 0, capsys.readouterr()
    assert "EQUAL" in capsys.readouterr().out
