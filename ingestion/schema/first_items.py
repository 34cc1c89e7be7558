"""Types learnt from a batch's first items (``types.Schema.sampled``), proven by the pass that
stages the batch: at every path, a value of a descriptor detection did not see there in those
items does not fit (``guarded``), and a value that does not fit fails the batch with
``SAMPLE_MISFIT`` (``typed_columns``) before its commit.
"""

from __future__ import annotations

from typing import Any

from ingestion.dynamodb.values import DESCRIPTORS, field
from ingestion.schema.type_rules import DETECTED_MARK

# The message a batch staged with types from its first items (``Schema.sampled``) fails with when
# a value does not fit them: staging (ingestion/staging/exports.py) then detects the types from
# every item and stages the batch again.
SAMPLE_MISFIT = "dynamodb-lakehouse: values the first items' types do not describe"


def seen_descriptors(info: dict[str, Any] | None) -> list[str] | None:
    """The descriptors a value may have where detection saw ``info`` (its ``dynamodb_types``),
    for a schema learnt from the first items: those seen there (NULL always, being no value);
    where only NULL was seen, S too (its type, text, is what S would give). None: any (a
    declared entry, or no detection record)."""
    if not info or DETECTED_MARK not in info:
        return None
    kinds = [d for d in info[DETECTED_MARK] if d != "NULL"]
    return kinds or ["S"]


def guarded(value: str, decoded: str, seen: dict[str, Any] | None) -> str:
    """``decoded`` (the SQL of ``value`` decoded), null where ``value`` has a descriptor not in
    ``seen_descriptors(seen)``."""
    kinds = seen_descriptors(seen)
    others = [d for d in DESCRIPTORS if kinds is not None and d not in kinds and d != "NULL"]
    if not others:
        return decoded
    unseen = " or ".join(f"{field(value, d)} is not null" for d in others)
    return f"case when not ({unseen}) then {decoded} end"


def below(seen: dict[str, Any] | None, step: str, name: str | None = None) -> dict[str, Any] | None:
    """Detection's record of a struct field (``step`` ``fields``) or of a list's elements."""
    if not seen or step not in seen:
        return None
    found = seen[step] if name is None else seen[step].get(name)
    return found if isinstance(found, dict) else None
