"""Following a table through the calls that pass it on, as the code runs (no reading of source).

A *stop* is a call into a function of ``ingestion`` that receives the table: its entry, its handle,
a list holding one of them, or one of its names (the entry's, or a catalog name holding it).
Comprehensions and lambdas are no stops; their calls are. A file is *entered* each time a stop is in
another file than the stop before it, on the same thread (the counts run on threads of their own
while ``dbt test`` runs). The merge's shape, measured: ``tests/merge/test_table_handle.py``.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

PACKAGE = Path(__file__).resolve().parent.parent / "ingestion"
ANONYMOUS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>", "<module>")


@dataclass
class Trace:
    stops: list[tuple[str, str, int]] = field(default_factory=list)  # (file, function, thread)
    entries: Counter[str] = field(default_factory=Counter)
    _last: dict[int, str] = field(default_factory=dict)

    @property
    def files(self) -> set[str]:
        return {file for file, _, _ in self.stops}

    def add(self, file: str, function: str, thread: int) -> None:
        self.stops.append((file, function, thread))
        if self._last.get(thread) != file:
            self.entries[file] += 1
        self._last[thread] = file

    def report(self) -> str:
        lines = [f"{len(self.stops)} stops in {len(self.files)} files"]
        lines += [f"  {file}: entered {n}" for file, n in self.entries.most_common()]
        lines += ["stops:"] + [f"  {file}:{function}" for file, function, _ in self.stops]
        return "\n".join(lines)


def _holds(value: Any, marks: Callable[[Any], bool], depth: int = 0) -> bool:
    if marks(value):
        return True
    if depth < 2 and isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds(v, marks, depth + 1) for v in list(value)[:50])
    if depth < 1 and isinstance(value, dict):
        return any(_holds(v, marks, depth + 1) for v in list(value)[:50])
    return False


@contextmanager
def traced(table: str, start: str = "merge_tables") -> Iterator[Trace]:
    """The stops of the code run inside, following the table named ``table``, from the call of
    the function ``start`` on (what calls it chose the table: the command line, its config)."""
    trace = Trace()
    root = str(PACKAGE)
    started, done = threading.Event(), threading.Event()

    def marks(value: Any) -> bool:
        if isinstance(value, str):
            return value == table or value.endswith(f".{table}") or value.endswith(f".`{table}`")
        name = getattr(value, "name", None)
        return isinstance(name, str) and name == table and hasattr(value, "keys")

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        code = frame.f_code
        if event == "return" and code.co_name == start and code.co_filename.startswith(root):
            done.set()  # the trace ends where ``start`` returns
        if event != "call":
            return
        if not code.co_filename.startswith(root) or code.co_name in ANONYMOUS:
            return
        if code.co_name == start:
            started.set()
            done.clear()
        if not started.is_set() or done.is_set():
            return
        arguments = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(a) for a in arguments]
        if any(_holds(v, marks) for v in values):
            file = str(Path(code.co_filename).relative_to(PACKAGE.parent))
            trace.add(file, code.co_qualname, threading.get_ident())

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield trace
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
