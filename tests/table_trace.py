"""Following a table through the calls that pass it on, as the code runs (no reading of source).

A *stop* is a call into a function of ``ingestion`` that receives the table: its entry, its handle,
or a list holding one of them; with ``names=True`` also one of its names (the entry's, or a catalog
name holding it), which counts every helper a name goes through (quoting, formatting).
Comprehensions and lambdas are no stops; their calls are. Nor are calls into the command layer
(``ingestion/cli``: arguments in, text out), where a trip begins and ends: a job calls it only to
print its summary through its reporter, a table name as one cell of a row. A file is *entered*
each time a stop is in another file than the stop before it, on the same thread (the counts run
on threads of their own while ``dbt test`` runs). The merge's shape, measured:
``tests/merge/test_table_handle.py``.
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
COMMANDS = PACKAGE / "cli"  # the command layer: no stops (the module's docstring says why)
ANONYMOUS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>", "<module>")


@dataclass(frozen=True)
class Stop:
    file: str
    function: str
    thread: int
    by_name: bool  # the call received only one of the table's names, not the table


@dataclass
class Trace:
    """The stops in the order they ran; ``names`` says whether calls that received only one of
    the table's names count (the stricter measure) or only calls that received the table."""

    all_stops: list[Stop] = field(default_factory=list)
    names: bool = True

    def of(self, names: bool) -> Trace:
        return Trace(self.all_stops, names)

    @property
    def stops(self) -> list[Stop]:
        return [s for s in self.all_stops if self.names or not s.by_name]

    @property
    def files(self) -> set[str]:
        return {stop.file for stop in self.stops}

    @property
    def entries(self) -> Counter[str]:
        entries: Counter[str] = Counter()
        last: dict[int, str] = {}
        for stop in self.stops:
            if last.get(stop.thread) != stop.file:
                entries[stop.file] += 1
            last[stop.thread] = stop.file
        return entries

    def report(self) -> str:
        subject = "the table or one of its names" if self.names else "the table"
        lines = [f"{len(self.stops)} stops in {len(self.files)} files (calls receiving {subject})"]
        lines += [f"  {file}: entered {n}" for file, n in self.entries.most_common()]
        lines += ["stops:"] + [f"  {stop.file}:{stop.function}" for stop in self.stops]
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
    the function ``start`` on (what calls it chose the table: the command line, its config).
    Both measures at once: ``trace.of(names=False)`` counts only calls that received the table."""
    trace = Trace()
    root, commands = str(PACKAGE), str(COMMANDS) + "/"
    started, done = threading.Event(), threading.Event()

    def is_table(value: Any) -> bool:
        name = getattr(value, "name", None)
        return isinstance(name, str) and name == table and hasattr(value, "keys")

    def is_name(value: Any) -> bool:
        if not isinstance(value, str):
            return False
        return value == table or value.endswith((f".{table}", f".`{table}`"))

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        code = frame.f_code
        if event == "return" and code.co_name == start and code.co_filename.startswith(root):
            done.set()  # the trace ends where ``start`` returns
        if event != "call":
            return
        if not code.co_filename.startswith(root) or code.co_name in ANONYMOUS:
            return
        if code.co_filename.startswith(commands):
            return
        if code.co_name == start:
            started.set()
            done.clear()
        if not started.is_set() or done.is_set():
            return
        arguments = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(a) for a in arguments]
        by_table = any(_holds(v, is_table) for v in values)
        if by_table or any(_holds(v, is_name) for v in values):
            file = str(Path(code.co_filename).relative_to(PACKAGE.parent))
            stop = Stop(file, code.co_qualname, threading.get_ident(), by_name=not by_table)
            trace.all_stops.append(stop)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield trace
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
