"""The rehearsal's entry point for one job run of several steps: each step is one command of the
job's own entry point (``ingestion/main.py`` runs ``ingestion.cli.main``), run one after another
in this one driver, on the job's parameters, archives and environment.

Why one run: each run on the rehearsal's cluster starts a driver and an executor JVM (half a
minute), and the steps' points need no process boundary between them. A point that does (a
fresh folder, other parameters) keeps a job run of its own, through ``main.py`` itself
(tests/aws/test_emr_rehearsal.py).

The argument: the steps as one JSON list of ``{"name", "arguments", "fails"}``. Each step's
output is framed on stdout and on stderr by ``MARK`` lines, its exit status in the last, so the
test reads every step's output apart and names the step that went wrong. The run stops at the
first step whose outcome is not the one it expects (``fails``): what follows would only fail
for the same cause.
"""

from __future__ import annotations

import json
import sys
import traceback

MARK = "@@rehearsal-step"


def _say(line: str) -> None:
    for stream in (sys.stdout, sys.stderr):
        print(f"{MARK} {line}", file=stream, flush=True)


def main() -> int:
    from ingestion.cli import main as command  # from the job's archive, as main.py imports it

    for step in json.loads(sys.argv[1]):
        _say(f"start {step['name']}")
        try:
            code = command(step["arguments"])
        except SystemExit as exc:  # argparse's refusal
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # what main() does not turn into a line: its traceback, as a job's
            traceback.print_exc()
            code = 1
        _say(f"end {step['name']} {code}")
        if bool(code) != bool(step.get("fails")):
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
