"""spark-submit entry point: ``spark-submit ingestion/main.py ingest --table books <export>``.

Runs the same commands as ``ddb-lakehouse``; spark-submit sets master and driver memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a file, this folder is on sys.path, not its parent: make `ingestion` importable
    # even where the package is not installed (e.g. shipped with --py-files on a cluster).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ingestion.cli import main

    raise SystemExit(main())
