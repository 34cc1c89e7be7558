"""What every benchmark records with its figures: the machine, the Spark settings, the command."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def write(name: str, figures: dict[str, Any], command: str) -> dict[str, Any]:
    """Add machine, Spark settings and command to ``figures``; write results/<name>.json; print."""
    from ingestion.spark.spark_config import spark_conf

    conf = spark_conf()
    document = {
        "benchmark": name,
        **figures,
        "machine": {
            "cores": os.cpu_count(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
            "python": platform.python_version(),
        },
        "spark": {
            k: conf[k]
            for k in ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions")
        },
        "command": command,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, indent=2))
    return document
