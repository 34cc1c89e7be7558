"""The items a set of sample exports and stream files leaves, computed in plain Python: what the
final table must hold (the demo and the tests compare with it)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from ingestion.samples.stream import stream_changes
from ingestion.sources.manifest import FULL, read_export


def expected_items(
    folders: list[Path], keys: list[str], ttl_keep: bool = False
) -> dict[str, dict[str, Any]]:
    """The items a sequence of exports (and stream change-file folders, ``<location>/<table>``)
    leaves, applied in plain Python (for the demo's check): a full export is the whole table; the
    changes of an incremental export or a stream folder apply in (version, sequence) order. With
    ``ttl_keep``, a TTL expiry keeps its last image, and a later full export does not drop it
    (an expired item is in no later export); a newer change of its key replaces it."""
    state: dict[str, tuple[tuple[int, str], dict[str, Any] | None, bool]] = {}
    for folder in folders:
        if not (folder / "manifest-summary.json").exists():
            changes = stream_changes(folder, keys, ttl_keep)
        else:
            export = read_export(folder, verify=False)
            if export.export_type == FULL:
                state = {k: change for k, change in state.items() if change[2]}
            changes = []
            for data_file in export.files:
                for text in gzip.decompress(data_file.path.read_bytes()).decode().splitlines():
                    line = json.loads(text)
                    if "Item" in line:
                        version, image, identity = export.version_micros, line["Item"], line["Item"]
                    else:
                        version = export.version_micros  # the end of its window
                        image, identity = line.get("NewImage"), line["Keys"]
                    key = json.dumps([identity[k] for k in keys])
                    changes.append(((version, ""), key, image, False))
        for version, key, image, kept in sorted(changes, key=lambda c: c[0]):
            if key not in state or state[key][0] <= version:
                state[key] = (version, image, kept)
    return {k: image for k, (_, image, _) in state.items() if image is not None}
