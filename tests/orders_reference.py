"""The orders chain of the incremental and crash tests: a full export and incrementals of
``orders`` (``ITEMS`` items), and the final table they leave, computed independently in plain
Python from the export files (``expected_items``), compared value by value
(``assert_final_equals``). The ``chain`` fixture is in ``conftest.py``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from items_back import final_items, strict_item
from reference import expected, same

from ingestion.dynamodb.tables import get_table
from ingestion.samples import orders_chain, sample_exports
from ingestion.schema import schema_file
from ingestion.sources import manifest

ITEMS, SEED = 120, 5


def write_chain(out: Path) -> list[Path]:
    """The full export of ``orders`` and its incrementals, in order."""
    full = sample_exports.write_samples(out, ITEMS, SEED, ["orders"])["orders"]
    return [full, *orders_chain.write_orders_chain(out, ITEMS, SEED)]


def key_of(image: dict) -> tuple[str, str]:
    return image["customer_id"]["S"], image["order_id"]["S"]


def expected_items(exports: list[Path]) -> dict[tuple[str, str], dict]:
    """The table after the exports, computed in plain Python from the files."""
    return {k: image for k, (_, image) in expected_state(exports).items()}


def expected_state(exports: list[Path]) -> dict[tuple[str, str], tuple[int, dict]]:
    """Key -> (version, image) of every item the exports leave, in plain Python."""
    state: dict[tuple[str, str], tuple[int, dict | None]] = {}
    for folder in exports:
        export = manifest.read_export(folder, verify=False)
        changes = []
        for data_file in export.files:
            for text in gzip.decompress(data_file.path.read_bytes()).decode().splitlines():
                line = json.loads(text)
                if "Item" in line:
                    changes.append((export.version_micros, key_of(line["Item"]), line["Item"]))
                else:
                    version = export.version_micros  # the end of its window
                    changes.append((version, key_of(line["Keys"]), line.get("NewImage")))
        if export.export_type == manifest.FULL:  # a full export is the whole table
            state = {}
        for version, key, image in sorted(changes, key=lambda c: c[0]):
            if key not in state or state[key][0] <= version:
                state[key] = (version, image)
    return {k: (v, image) for k, (v, image) in state.items() if image is not None}


def final_rows(spark) -> dict[tuple[str, str], dict]:
    """Key -> the row, with ``_item``: the item its columns and remainder give back."""
    return {
        (r["customer_id"], r["order_id"]): {**r.asDict(), "_item": item}
        for item, r in final_items(spark, "orders")
    }


def assert_final_equals(spark, exports: list[Path]) -> None:
    want = expected_items(exports)
    got = final_rows(spark)
    assert set(got) == set(want)
    orders = get_table("orders")
    columns = schema_file.from_file(schema_file.table_schema_file(orders))
    for key, image in want.items():
        row = got[key]
        assert strict_item(row["_item"]) == strict_item(image)
        for attribute in columns.attributes:
            value = expected(image.get(attribute.name), attribute.type)
            assert same(value, row[attribute.column]), (key, attribute.name, value)
