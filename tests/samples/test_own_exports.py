"""`write-export`: one's own items (JSON Lines) as an export in AWS's exact layout, read back by the
same manifest reader every ingest uses; every line checked before anything is written, a bad one
named in one line (exit 2). No Spark."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ingestion.cli import main
from ingestion.sources import manifest

ITEM = {"pk": {"S": "a"}, "n": {"N": "1.5"}, "m": {"M": {"l": {"L": [{"SS": ["x"]}]}}}}


def jsonl(path: Path, *lines: object) -> str:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return str(path)


def written(capsys) -> Path:
    out = capsys.readouterr().out
    assert "next: ddb-lakehouse add-table Own --partition-key pk:S" in out
    return Path(
        next(
            line.split(": ", 1)[1]
            for line in out.splitlines()
            if line.startswith("export written: ")
        )
    )


def lines(export: manifest.Export) -> list[dict]:
    return [
        json.loads(x)
        for f in export.files
        for x in gzip.decompress(f.path.read_bytes()).decode().splitlines()
    ]


def test_a_full_and_an_incremental_export_of_ones_own_items(tmp_path: Path, capsys) -> None:
    out = ["--table", "Own", "--partition-key", "pk:S", "--out", str(tmp_path / "out")]
    items = jsonl(tmp_path / "items.jsonl", ITEM, {"Item": {"pk": {"S": "b"}}}, "")
    assert main(["write-export", *out, "--items", items, "--at", "2026-12-01T00:00:00Z"]) == 0
    full = manifest.read_export(written(capsys))  # checksums and counts verified
    assert full.export_type == manifest.FULL and full.item_count == 2
    assert [line["Item"] for line in lines(full)] == [ITEM, {"pk": {"S": "b"}}]

    changes = jsonl(
        tmp_path / "changes.jsonl",
        {"Keys": {"pk": {"S": "a"}}, "OldImage": ITEM},
        {"Keys": {"pk": {"S": "c"}}, "NewImage": {"pk": {"S": "c"}, "z": {"BOOL": True}}},
    )
    window = ["--from", "2026-12-01T00:00:00Z", "--to", "2026-12-01T01:00:00Z"]
    assert main(["write-export", *out, "--changes", changes, *window]) == 0
    incremental = manifest.read_export(written(capsys))
    assert incremental.export_type == manifest.INCREMENTAL and incremental.item_count == 2
    found = lines(incremental)
    assert [sorted(line) for line in found] == [
        ["Keys", "Metadata", "OldImage"],
        ["Keys", "Metadata", "NewImage"],
    ]
    micros = [int(line["Metadata"]["WriteTimestampMicros"]["N"]) for line in found]
    assert (
        micros == sorted(micros) and micros[0] > 1_796_083_200_000_000
    )  # after the window's start


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("{not json", "not JSON"),
        (
            {"pk": {"S": "a"}, "n": {"X": "1"}},
            'attribute \'n\': {"X": "1"} is not a DynamoDB JSON value',
        ),
        ({"pk": {"S": "a"}, "m": {"M": {"k": {"L": [{"Q": 1}]}}}}, "attribute 'm'.k[0]"),
        ({"n": {"N": "1"}}, "no key attribute 'pk'"),
        ({"pk": {"N": "1"}}, "key attribute 'pk' is N, not S"),
        ([1, 2], "not an item"),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_written(tmp_path: Path, capsys, line, said) -> None:
    items = jsonl(tmp_path / "bad.jsonl", ITEM, line)
    out = tmp_path / "out"
    code = main(
        [
            "write-export",
            "--table",
            "Own",
            "--partition-key",
            "pk:S",
            "--out",
            str(out),
            "--items",
            items,
        ]
    )
    assert code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and said in error[0] and "line 2" in error[0], error
    assert not out.exists()


def test_a_change_outside_its_window_or_a_window_backwards_is_refused(
    tmp_path: Path, capsys
) -> None:
    late = {
        "Keys": {"pk": {"S": "a"}},
        "OldImage": ITEM,
        "Metadata": {"WriteTimestampMicros": {"N": "1896083200000000"}},
    }
    changes = jsonl(tmp_path / "changes.jsonl", late)
    base = [
        "write-export",
        "--table",
        "Own",
        "--partition-key",
        "pk",
        "--out",
        str(tmp_path / "out"),
        "--changes",
        changes,
    ]
    assert main([*base, "--from", "2026-12-01T00:00:00Z", "--to", "2026-12-01T01:00:00Z"]) == 2
    assert "is not within the window" in capsys.readouterr().err
    assert main([*base, "--from", "2026-12-01T02:00:00Z", "--to", "2026-12-01T01:00:00Z"]) == 2
    assert "before it starts" in capsys.readouterr().err
    assert main(base) == 2
    assert "--changes needs --from" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
