"""``python -m ingestion.cli COMMAND ...``: the same as ``ddb-lakehouse COMMAND ...``."""

from __future__ import annotations

from ingestion.cli.app import main

raise SystemExit(main())
