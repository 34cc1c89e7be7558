"""Column names from DynamoDB attribute names (the same rule is mirrored in macros/column_name.sql).

Lowercase; every run of characters outside ``[a-z0-9_]`` becomes one ``_``; a name that then starts
with a digit gets a leading ``_``. ``Title`` -> ``title``, ``first-name`` -> ``first_name``.
"""

from __future__ import annotations

import re

_OUTSIDE = re.compile(r"[^a-z0-9_]+")


def column_name(attribute: str) -> str:
    name = _OUTSIDE.sub("_", attribute.lower())
    if not name or name[0].isdigit():
        name = "_" + name
    return name
