"""Charts and the summary table from bench/results/*.json.

Writes bench/results/<name>.png for every result, bench/results/summary.md (one row per figure
with its target and whether it is met), puts that table with its commands into
docs/performance.md between the ``<!-- bench:start -->`` and ``<!-- bench:end -->`` markers, and
the README's headline (``<!-- bench:headline:start -->`` ... ``end -->``): at most
``HEADLINE_ROWS`` rows, one figure per question a user asks, each with the date and commit of its
result file, and marked stale when a later commit changed the code it measures.
`make bench` runs it last; it reads
only the JSON files, so it can be rerun alone: .venv/bin/python bench/report.py
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PERFORMANCE = ROOT / "docs" / "performance.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
HEADLINE_START, HEADLINE_END = "<!-- bench:headline:start -->", "<!-- bench:headline:end -->"
Row = tuple[str, str, str, str, str]  # benchmark, data, figure, target, met
HEADLINE_ROWS = 8
# What a figure measures: a later commit that changes one of these paths makes it stale.
MEASURED = ("ingestion", "java", "macros", "models", "dbt_project.yml", "profiles.yml", "conf")
# Result files whose benchmark was retired: their figures stay, with when they were measured, and
# are never stale (nothing can re-measure them). Why each went: docs/performance.md.
RETIRED = {
    name: "bench/scale.py, retired at issue 51 (export_to_final and apply_cost measure the same "
    "against closer floors)"
    for name in ("ingest_full_export", "memory", "incremental_apply")
}


def _met(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "**not met**")


def _save(fig: Any, name: str) -> None:
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(fig)


def _label(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


def _against_floor(runs: list[dict], stage: str, title: str, name: str) -> None:
    """Bars of the floor and of ``<stage>_seconds`` per run, with the ratio over each."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    x = range(len(runs))
    ax.bar([i - 0.2 for i in x], [r["floor_seconds"] for r in runs], 0.4, label="floor")
    ax.bar([i + 0.2 for i in x], [r[f"{stage}_seconds"] for r in runs], 0.4, label=stage)
    for i, r in enumerate(runs):
        ax.annotate(
            f"{r['ratio_to_floor']}x", (i + 0.2, r[f"{stage}_seconds"]), ha="center", va="bottom"
        )
    ax.set_xticks(list(x), [_label(r["items"]) + " items" for r in runs])
    ax.set_ylabel("seconds")
    ax.set_title(title)
    ax.legend()
    _save(fig, name)


def ingest(doc: dict) -> list[Row]:
    runs = doc["runs"]
    _against_floor(
        runs, "ingest", f"Full-export ingest ({doc['table']}) vs floor", "ingest_full_export"
    )
    target = doc.get("target_ratio_to_floor", 2.0)
    return [
        (
            f"full-export ingest ({doc['table']})",
            f"{r['items']:,} items, {r['raw_mb']} MB raw / {r['compressed_mb']} MB gzip",
            f"{r['ingest_seconds']:.0f} s vs floor {r['floor_seconds']:.0f} s = "
            f"**{r['ratio_to_floor']}x**; {r['ingest_items_per_s']:,} items/s, "
            f"{r['ingest_raw_mb_per_s']} MB/s raw, {r['ingest_compressed_mb_per_s']} MB/s gzip",
            f"≤ {target}x floor",
            _met(r["ratio_to_floor"] <= target),
        )
        for r in runs
    ]


def memory(doc: dict) -> list[Row]:
    runs = doc["runs"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.bar([_label(r["items"]) for r in runs], [r["peak_driver_rss_mb"] for r in runs])
    ax.axhline(
        1024,
        color="grey",
        linestyle="--",
        label=f"heap cap ({doc['driver_memory']}); RSS adds the JVM's own",
    )
    ax.set_ylabel("peak driver RSS, MB")
    ax.set_title("Driver memory during full-export ingest")
    ax.legend()
    _save(fig, "memory")
    biggest = max(runs, key=lambda r: r["items"])
    return [
        (
            "memory (full-export ingest)",
            f"{biggest['items']:,} items, `spark.driver.memory={doc['driver_memory']}`",
            "peak driver RSS "
            + ", ".join(f"{_label(r['items'])}: {r['peak_driver_rss_mb']:.0f} MB" for r in runs),
            "finishes with a 1 GB heap (nothing collected)",
            _met(True),  # the result exists only if the run finished (asserted row counts)
        )
    ]


def apply(doc: dict) -> list[Row]:
    runs = doc["runs"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    sizes = [r["table_rows"] for r in runs]
    ax.plot(sizes, [r["merge_seconds"] for r in runs], "o-", label="merge (dbt run)")
    ax.plot(sizes, [r["apply_seconds"] for r in runs], "o-", label="ingest + merge")
    first = runs[0]["apply_seconds"]
    import math

    ax.plot(
        sizes,
        [first * 1.5 ** math.log10(s / sizes[0]) for s in sizes],
        "--",
        color="grey",
        label="target: 1.5x per 10x",
    )
    ax.set_xscale("log")
    ax.set_xlabel("final table rows")
    ax.set_ylabel("seconds")
    ax.set_title(f"Applying {runs[0]['changes']:,} changes ({runs[0]['deletes']:,} deletes)")
    ax.legend()
    _save(fig, "incremental_apply")
    rows: list[Row] = []
    for a, b in zip(runs, runs[1:], strict=False):
        per_10x = (b["apply_seconds"] / a["apply_seconds"]) ** (
            1 / math.log10(b["table_rows"] / a["table_rows"])
        )
        rows.append(
            (
                "incremental apply",
                f"{a['changes']:,} changes into {_label(a['table_rows'])} → "
                f"{_label(b['table_rows'])} rows",
                f"{a['apply_seconds']} s → {b['apply_seconds']} s (merge {a['merge_seconds']} → "
                f"{b['merge_seconds']} s) = **{per_10x:.2f}x per 10x**",
                "≤ 1.5x per 10x",
                _met(per_10x <= 1.5),
            )
        )
    return rows


def _first_apply(run: dict | None, case: str) -> str:
    """The process's first tested apply of the case (bench/apply_cost.py's ``first_apply``,
    paying the one-time costs), beside its warm figure; nothing for a run made before it was
    recorded."""
    first = ((run or {}).get("first_apply") or {}).get(case)
    if not first:
        return ""
    return (
        f"; the process's first: {first['apply_seconds']} s vs {first['floor_merge_seconds']} s "
        f"= {first['ratio_to_floor']}x"
    )


def apply_cost(doc: dict) -> list[Row]:
    """bench/apply_cost.py: the project's apply against a plain MERGE INTO, per size and case."""
    import math

    fig, ax = plt.subplots(figsize=(6, 3.6))
    rows: list[Row] = []
    runs = {r["table_rows"]: r for r in doc["runs"]}
    for case in ("random", "hot"):
        points = [
            (r["table_rows"], c) for r in doc["runs"] for c in r["cases"] if c["case"] == case
        ]
        sizes = [n for n, _ in points]
        ax.plot(sizes, [c["apply_seconds"] for _, c in points], "o-", label=f"apply ({case})")
        ax.plot(
            sizes,
            [c["floor_merge_seconds"] for _, c in points],
            "x--",
            label=f"MERGE INTO ({case})",
        )
        for n, c in points:
            rows.append(
                (
                    f"apply vs plain MERGE ({case})",
                    f"{c['changes']:,} changes of {c['keys']:,} keys into {_label(n)} rows",
                    f"{c['apply_seconds']} s vs {c['floor_merge_seconds']} s = "
                    f"**{c['ratio_to_floor']}x** (ingest {c['ingest_seconds']} s, dbt "
                    + ", ".join(f"{k} {v} s" for k, v in c["dbt_seconds"].items())
                    + ")"
                    + _first_apply(runs.get(n), case),
                    f"≤ {doc['target_ratio_to_floor']}x MERGE INTO",
                    _met(c["ratio_to_floor"] <= doc["target_ratio_to_floor"]),
                )
            )
        # The target (issue 53): the apply's growth per 10x rows at most 1.2x the plain MERGE
        # INTO's own growth over the same sizes (an apply cannot grow less than the MERGE in it).
        for (n, a), (m, b) in zip(points, points[1:], strict=False):
            scale = 1 / math.log10(m / n)
            per_10x = (b["apply_seconds"] / a["apply_seconds"]) ** scale
            merge_10x = (b["floor_merge_seconds"] / a["floor_merge_seconds"]) ** scale
            allowed = doc["target_growth_per_10x"] * merge_10x
            rows.append(
                (
                    f"apply growth ({case})",
                    f"{_label(n)} → {_label(m)} rows",
                    f"{a['apply_seconds']} s → {b['apply_seconds']} s = **{per_10x:.2f}x per "
                    f"10x**; "
                    f"MERGE INTO {a['floor_merge_seconds']} s → {b['floor_merge_seconds']} s = "
                    f"{merge_10x:.2f}x per 10x",
                    f"≤ {doc['target_growth_per_10x']}x the MERGE INTO's growth ({allowed:.2f}x)",
                    _met(per_10x <= allowed),
                )
            )
    # The same apply with no `dbt test` (a bound: no design of the tests takes the apply below it).
    for run in doc["runs"]:
        for c in run.get("cases_without_tests", []):
            rows.append(
                (
                    f"apply without its tests vs plain MERGE ({c['case'].split()[1]})",
                    f"{c['changes']:,} changes of {c['keys']:,} keys into "
                    f"{_label(run['table_rows'])} rows",
                    f"{c['apply_seconds']} s vs {c['floor_merge_seconds']} s = "
                    f"**{c['ratio_to_floor']}x** (ingest {c['ingest_seconds']} s, dbt "
                    + ", ".join(f"{k} {v} s" for k, v in c["dbt_seconds"].items())
                    + ")",
                    "a bound, not a target: the tested apply cannot cost less",
                    _met(None),
                )
            )
    ax.set_xscale("log")
    ax.set_xlabel("final table rows")
    ax.set_ylabel("seconds")
    ax.set_title("Applying 10,000 changes: the project vs MERGE INTO")
    ax.legend(fontsize=7)
    _save(fig, "apply_cost")
    return rows


def buckets(doc: dict) -> list[Row]:
    """bench/buckets.py: a merge's seconds per layout of the final table, against unbucketed."""
    runs = doc["runs"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    names = [str(r["buckets"] or "none") for r in runs]
    for offset, case in ((-0.2, "tick"), (0.2, "batch")):
        ratios = [
            next(c for c in r["cases"] if c["case"] == case)["ratio_to_unbucketed"] for r in runs
        ]
        ax.bar([i + offset for i in range(len(runs))], ratios, 0.4, label=case)
    ax.axhline(1.0, color="grey", linestyle="--")
    ax.set_xticks(list(range(len(runs))), names)
    ax.set_xlabel("buckets")
    ax.set_ylabel("merge seconds / unbucketed")
    ax.set_title(f"Merges into {_label(doc['table_rows'])} {doc['table']} rows by layout")
    ax.legend()
    _save(fig, "buckets")
    return [
        (
            f"buckets ({c['case']})",
            f"{c['changes']:,} changes into {_label(doc['table_rows'])} rows, "
            f"{r['buckets'] or 'no'} buckets",
            f"merge {c['merge_seconds']} s = **{c['ratio_to_unbucketed']}x** unbucketed; "
            f"{c['changed_buckets'] or 1} partition(s) changed, {r['data_files']} data files",
            "informs the advice (docs/performance.md)",
            _met(None),
        )
        for r in runs
        for c in r["cases"]
    ]


def daily(doc: dict) -> list[Row]:
    steps = doc["steps"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = ["full" if s["step"] == "full export" else s["step"].split()[-1] for s in steps]
    ax.bar(names, [s["ingest_seconds"] for s in steps], label="ingest")
    ax.bar(
        names,
        [s["merge_seconds"] for s in steps],
        bottom=[s["ingest_seconds"] for s in steps],
        label="merge + test",
    )
    ax.bar(["maintain"], [doc["maintain_seconds"]], label="maintain")
    ax.set_ylabel("seconds")
    ax.set_title(f"Daily sync of orders ({doc['items']:,} items, {doc['increments']} incrementals)")
    ax.legend()
    _save(fig, "daily_sync")
    before, after = (
        doc["data_and_delete_files_before_maintain"],
        doc["data_and_delete_files_after_maintain"],
    )
    incrementals = [s for s in steps if s["step"] != "full export"]
    target = doc.get("target_seconds_each", 30)  # written before issue 53: its issue's 30 s
    return [
        (
            "daily sync (orders)",
            f"full export of {doc['items']:,} + {doc['increments']} incrementals (6% each) + "
            f"maintain",
            f"{doc['total_seconds']:.0f} s in all; files {before[0]} data + {before[1]} delete → "
            f"{after[0]} + {after[1]} after maintain; {doc['rows_after']:,} rows = expected",
            "rows equal plain Python",
            _met(doc["rows_after"] == doc["rows_expected"]),
        ),
        (
            "daily sync: each incremental (orders)",
            f"{len(incrementals)} incrementals of 6% into {doc['items']:,} rows",
            "ingest + merge + tests "
            + ", ".join(f"{s['ingest_seconds'] + s['merge_seconds']:.0f}" for s in incrementals)
            + " s",
            f"≤ {target} s each",
            _met(all(s["ingest_seconds"] + s["merge_seconds"] <= target for s in incrementals)),
        ),
    ]


def freshness(doc: dict) -> list[Row]:
    lat = doc["latency_s"]
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.bar(list(lat), list(lat.values()))
    ax.axhline(doc["target_p95_s"], color="grey", linestyle="--", label="target p95")
    ax.set_ylabel("seconds, change file → visible")
    ax.set_title(f"Freshness at {doc['rate_changes_per_s']} changes/s")
    ax.legend()
    _save(fig, "freshness")
    return [
        (
            "freshness (books, `watch`)",
            f"{doc['rate_changes_per_s']} changes/s for {doc['writer_seconds']} s, "
            f"interval {doc['watch_interval_s']} s",
            f"p50 {lat['p50']} s, p95 {lat['p95']} s, max {lat['max']} s; "
            f"{doc['changes_not_merged']} changes not merged",
            f"p95 ≤ {doc['target_p95_s']} s",
            _met(lat["p95"] <= doc["target_p95_s"] and doc["changes_not_merged"] == 0),
        )
    ] + [
        (
            f"freshness, one `watch` of {run['tables']} stream tables",
            f"{doc['rate_changes_per_s']} changes/s in total for {doc['writer_seconds']} s, "
            f"interval {doc['watch_interval_s']} s",
            f"p95 {run['latency_s']['p95']} s over all, worst table's p95 "
            f"{run['worst_table_p95_s']} s; {run['changes_not_merged']} changes not merged",
            f"p95 ≤ {doc.get('target_p95_per_table_s', 20)} s per table",
            _met(
                (run["worst_table_p95_s"] or 1e9) <= doc.get("target_p95_per_table_s", 20)
                and run["changes_not_merged"] == 0
            ),
        )
        for run in doc.get("runs", [])
        if run["tables"] > 1
    ]


def maintenance(doc: dict) -> list[Row]:
    keys = ["data_files", "delete_files", "snapshots"]
    stages = [
        ("after merges", doc["before"]),
        ("maintain", doc["after_maintain"]),
        ("2 days later", doc["after_maintain_2_days_later"]),
    ]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, (label, values) in enumerate(stages):
        ax.bar(
            [k + i * 0.27 for k in range(len(keys))], [values[k] for k in keys], 0.27, label=label
        )
    ax.set_xticks([k + 0.27 for k in range(len(keys))], keys)
    ax.set_title(f"Maintenance after {doc['merges']} merges")
    ax.legend()
    _save(fig, "maintenance")
    return [
        (
            "maintenance (books)",
            f"{doc['merges']} merges of {doc['changes'] // doc['merges']} changes",
            f"data files {doc['before']['data_files']} → {doc['after_maintain']['data_files']}, "
            f"delete files {doc['before']['delete_files']} → "
            f"{doc['after_maintain']['delete_files']}; {doc['reader_reads']:,} DuckDB reads "
            f"during maintain, {doc['reader_failures']} failed",
            "0 failed reads",
            _met(doc["reader_failures"] == 0),
        )
    ]


def detect(doc: dict) -> list[Row]:
    runs = doc["runs"]
    _against_floor(runs, "detect", "Schema detection vs floor", "detect_schema")
    return [
        (
            f"schema detection ({doc['table']})",
            f"{r['items']:,} items",
            f"{r['detect_seconds']:.0f} s vs floor {r['floor_seconds']:.0f} s = "
            f"{r['ratio_to_floor']}x; peak heap {r['peak_heap_mb_detect']:.0f} MB",
            "no target (runs once per table)",
            _met(None),
        )
        for r in runs
    ]


def export_to_final(doc: dict) -> list[Row]:
    """bench/export_to_final.py: each step's process against the typed read (the floor)."""
    runs, targets = doc["runs"], doc["targets_ratio_to_floor"]
    steps = ["floor", "detect", "ingest", "merge", "sync"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(steps)
    for k, step in enumerate(steps):
        xs = [i + (k - 2) * width for i in range(len(runs))]
        ax.bar(xs, [r["seconds"][step] for r in runs], width, label=step)
    ax.set_xticks(list(range(len(runs))), [f"{r['table']} {_label(r['items'])}" for r in runs])
    ax.set_ylabel("seconds (one process each)")
    ax.set_title("A full export to a queryable final table, by step")
    ax.legend()
    _save(fig, "export_to_final")
    rows: list[Row] = []
    for r in runs:
        for step, target in targets.items():
            ratio = r["ratio_to_floor"][step]
            rows.append(
                (
                    f"export to final table: {step}",
                    f"{r['table']}, {r['items']:,} items ({r['raw_mb']} MB of DynamoDB JSON), "
                    f"{doc['driver_memory']} driver heap",
                    f"{r['seconds'][step]} s vs floor {r['seconds']['floor']} s = **{ratio}x**",
                    f"<= {target}x the floor",
                    _met(ratio <= target),
                )
            )
        if "peak_driver_rss_mb" in r:  # a run finished only if every step fit its capped heap
            step, rss = max(r["peak_driver_rss_mb"].items(), key=lambda kv: kv[1])
            rows.append(
                (
                    "export to final table, peak driver memory",
                    f"{r['table']}, {r['items']:,} items, every step",
                    f"largest JVM resident set {rss:.0f} MB ({step}); heap capped at "
                    f"{doc['driver_memory']}, every step finished",
                    f"every step within a {doc['driver_memory']} heap",
                    _met(True),
                )
            )
        if "parquet_bytes_per_item" in r:  # recorded since the typed change log's baseline
            stored = r["parquet_bytes_per_item"]
            rows.append(
                (
                    "export to final table, Parquet bytes per item",
                    f"{r['table']}, {r['items']:,} items, after the sync",
                    f"staging change log {stored['staging']} B, final table {stored['final']} B",
                    "change log: half of the baseline (the typed change log's issue)",
                    "n/a",
                )
            )
    return rows


def design_floor(doc: dict) -> list[Row]:
    """bench/export_to_final.py --rounds: the design's own floor against the floor, each round."""
    rows: list[Row] = []
    for r in doc["runs"]:
        for name, what in (
            ("design_floor", "with `_image`"),
            ("design_floor_no_image", "without `_image`"),
        ):
            ratios = [round(x[name] / x["floor"], 2) for x in r["rounds"]]
            rows.append(
                (
                    f"export to final table: the design's floor, {what}",
                    f"{r['table']}, {r['items']:,} items, {len(ratios)} interleaved rounds, "
                    f"{doc['driver_memory']} driver heap",
                    f"{', '.join(f'{x}x' for x in ratios)} the floor (lowest **{min(ratios)}x**)",
                    "none; at or above P1's 2.0x, P1 is out of this design's reach",
                    "n/a",
                )
            )
    return rows


def single_table(doc: dict) -> list[Row]:
    """bench/single_table.py: a single-table design's sync split, against the same unsplit."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for offset, rule in ((-0.2, "key"), (0.2, "attribute")):
        ratios = [
            next(r for r in round_ if r["rule"] == rule)["ratio_to_unsplit"]
            for round_ in doc["rounds"]
        ]
        ax.bar([i + offset for i in range(len(ratios))], ratios, 0.4, label=f"split by {rule}")
    ax.axhline(1.0, color="grey", linestyle="--")
    ax.set_xticks(
        list(range(len(doc["rounds"]))), [f"round {i + 1}" for i in range(len(doc["rounds"]))]
    )
    ax.set_ylabel("sync seconds / unsplit")
    ax.set_title(f"A single-table design of {_label(doc['items'])} items, split")
    ax.legend()
    _save(fig, "single_table")
    rows: list[Row] = []
    for rule in ("key", "attribute"):
        runs = [next(r for r in round_ if r["rule"] == rule) for round_ in doc["rounds"]]
        floors = [next(r for r in round_ if r["rule"] == "unsplit") for round_ in doc["rounds"]]
        ratios = ", ".join(f"{r['ratio_to_unsplit']}x" for r in runs)
        rows.append(
            (
                f"a single-table design split by {rule} (`sync`, one full export)",
                f"{doc['items']:,} items ({doc['users']:,} users), {len(runs)} rounds",
                f"{', '.join(str(r['sync_seconds']) for r in runs)} s = "
                f"**{ratios}** unsplit "
                f"({', '.join(str(f['sync_seconds']) for f in floors)} s); merge "
                f"{', '.join(str(r['merge_seconds']) for r in runs)} s against "
                f"{', '.join(str(f['merge_seconds']) for f in floors)} s",
                "none (issue 35: the ratio reported)",
                "n/a",
            )
        )
    return rows


def small_commands(doc: dict) -> list[Row]:
    ratios, medians = doc["ratio_to_help"], doc["median_seconds"]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    ax.barh(list(medians), list(medians.values()))
    ax.set_xlabel("seconds (median), each a process")
    ax.set_title("Small commands against `--help`")
    _save(fig, "small_commands")
    shown = ", ".join(
        f"{name} {medians[name]} s ({ratios[name]}x)" for name in medians if name != "help (floor)"
    )
    return [
        (
            "small commands (books, no JVM)",
            f"{doc['items']:,} items, median of {doc['rounds']} runs each",
            f"`--help` {medians['help (floor)']} s; {shown}",
            f"status and a sync with nothing new ≤ {doc['target_ratio']}x `--help`",
            _met(doc["target_met"]),
        )
    ]


def merge_cost(doc: dict) -> list[Row]:
    m = doc["median_seconds"]
    return [
        (
            f"a small merge, warm, beside the same merge at {doc['baseline']} and a plain MERGE",
            f"{doc['changes']} stream changes into {doc['rows']:,} `books` rows, "
            f"{doc['rounds']} interleaved rounds",
            f"{m['now merge']:.2f} s = **{doc['now_over_baseline']}x** the baseline's "
            f"{m['baseline merge']:.2f} s; {doc['now_over_its_floor']}x a plain MERGE "
            f"({m['now floor']:.2f} s; the baseline {doc['baseline_over_its_floor']}x its own)",
            f"≤ {doc['target']}x the baseline",
            _met(doc["met"]),
        )
    ]


def merge_tables(doc: dict) -> list[Row]:
    m = doc["median_seconds"]
    return [
        (
            f"{doc['tables']} tables in one `merge` beside one table's `merge`, warm",
            f"{doc['changes']} stream changes into {doc['rows']:,} rows in each table, "
            f"{doc['rounds']} interleaved rounds",
            f"{m['ten']:.2f} s = **{doc['ten_over_one']}x** one table's {m['one']:.2f} s",
            f"≤ {doc['target']}x one table",
            _met(doc["met"]),
        )
    ]


def tick_profile(doc: dict) -> list[Row]:
    steps = doc["per_table_s"]
    return [
        (
            f"a `watch` tick of {doc['tables']} stream tables, profiled",
            f"{doc['changes_per_table_per_tick']} changes per table, {doc['ticks_profiled']} ticks",
            f"{doc['tick_s']} s a tick: per table ingest {steps['ingest (all of it)']} s, merge "
            f"{steps['merge (all of it)']} s (dbt run {steps['  dbt run']} s); floor "
            f"{doc['floor_tick_s']} s ({doc['tick_vs_floor']}x)",
            "none (the profile behind freshness)",
            "-",
        )
    ]


def first_load_profile(doc: dict) -> list[Row]:
    steps, floors = doc["steps_s"], doc["floors_s"]
    floor = floors["typed read (the floor's reader)"]
    return [
        (
            f"a first load of `{doc['table']}`, profiled",
            f"{doc['items']:,} items, one process, 1g driver heap",
            f"sync {doc['sync_s']} s: detection {steps['schema detection']} s, staging "
            f"{steps['staging (decode, _image, write, commit)']} s, dbt run {steps['dbt run']} s, "
            f"dbt test {steps['dbt test']} s; warm, against the typed read {floor} s "
            f"({doc['warm_sync_vs_floor']}x) and a parse, stage and copy "
            f"{doc['parse_stage_copy_s']} s ({doc['sync_vs_parse_stage_copy']}x)",
            "none (the profile behind export to final table)",
            "-",
        )
    ]


def apply_process(doc: dict) -> list[Row]:
    """bench/apply_cost.py --processes: ``sync`` of an incremental against a plain MERGE INTO
    job."""
    return [
        (
            "apply as processes: `sync` vs a plain MERGE INTO job",
            f"{sum(r['changes'].values()):,} changes ("
            + ", ".join(f"{v:,} {k}" for k, v in r["changes"].items())
            + f") into {_label(r['size'])} rows, JVM start included",
            f"{r['sync_seconds']} s vs {r['plain_merge_job_seconds']} s = "
            f"**{r['ratio_to_floor']}x**",
            f"≤ {doc['target_ratio_to_floor']}x the plain job",
            _met(r["ratio_to_floor"] <= doc["target_ratio_to_floor"]),
        )
        for r in doc["runs"]
    ]


def history_cost(doc: dict) -> list[Row]:
    """bench/history_cost.py: a merge with the table's history on, against the same without."""
    without, with_ = doc["without_history"], doc["with_history"]
    return [
        (
            "merge with the table's history (`history: true`) vs without",
            f"{doc['changes']:,} changes (an incremental export) into {_label(doc['items'])} "
            f"`{doc['table']}` rows, median of {doc['rounds']}, with tests",
            f"{with_['merge_median_seconds']} s vs {without['merge_median_seconds']} s = "
            f"**{doc['ratio']}x**; first build {with_['first_build_seconds']} s vs "
            f"{without['first_build_seconds']} s",
            f"≤ {doc['target_ratio']}x the merge without",
            _met(doc["ratio"] <= doc["target_ratio"]),
        )
    ]


def verify_cost(doc: dict) -> list[Row]:
    return [
        (
            "verify a table against its full export",
            f"{doc['items']:,} `{doc['table']}` items, each a process, 1g driver heap",
            f"{doc['verify_seconds']} s vs {doc['floor_seconds']} s = **{doc['ratio_to_floor']}x** "
            "the floor (a typed read of the export)",
            f"≤ {doc['target_ratio_to_floor']}x the floor",
            _met(doc["ratio_to_floor"] <= doc["target_ratio_to_floor"]),
        )
    ]


def migration(doc: dict) -> list[Row]:
    """bench/migration.py: `rebuild` of a change log staged with `_image`, beside a first load."""
    s = doc["seconds"]
    return [
        (
            "migrate a change log staged with `_image` to `_rest` (`rebuild`)",
            f"{doc['items']:,} `{doc['table']}` items, each a process, 1g driver heap",
            f"{s['rebuild']} s = **{doc['rebuild_vs_first_load']}x** a first load's `sync` "
            f"({s['first_load_sync']} s), {doc['rebuild_vs_floor']}x the floor ({s['floor']} s); "
            "rows equal",
            "none (issue 52: its cost in the docs)",
            "-",
        )
    ]


def decoder_probe(doc: dict) -> list[Row]:
    """bench/decoder_probe.py: staging's decode in Spark SQL beside a JVM decoder probe."""
    return [
        (
            "staging's decode beside a JVM decoder (a probe, decision 0013)",
            f"{doc['items']:,} `{doc['table']}` items, warm, `noop`, 1g driver heap",
            f"Spark SQL {doc['staging_decode_s']} s ({doc['staging_vs_floor']}x the typed read), "
            f"the probe {doc['probe_decode_s']} s ({doc['probe_vs_floor']}x); "
            f"{doc['rows_differing']} rows differ",
            "none (the measurement behind decision 0013)",
            "-",
        )
    ]


def deep_items(doc: dict) -> list[Row]:
    """bench/deep_items.py: each step's time, items 2 deep against 8 deep, beside their size."""
    small, large = doc["runs"]
    worst = max(doc["step_ratios"], key=doc["step_ratios"].get)
    return [
        (
            "deep items: time against the item's size (a list of maps 2 deep vs 8 deep)",
            f"{doc['items']:,} items, width {doc['width']}, through the CLI in one process; "
            f"{small['item_values']:,} vs {large['item_values']:,} values an item "
            f"({doc['item_size_ratio']}x)",
            ", ".join(f"{k} {v}x" for k, v in doc["step_ratios"].items()) + f" (largest: {worst})",
            f"each step ≤ {doc['item_size_ratio']}x (linear in the item's size)",
            _met(doc["at_most_linear"]),
        )
    ]


def invoices(doc: dict) -> list[Row]:
    """bench/invoices.py: a new user's own nested table, each step a process on the default
    driver."""
    s, r = doc["seconds"], doc["ratios"]
    return [
        (
            "a table of one's own, deep items (`Invoices`: full, then incremental export with "
            "drift)",
            f"{doc['items']:,} items; {doc['changes']['updated']} updates adding a wider nested "
            f"decimal, {doc['changes']['deleted']} deletes, {doc['changes']['inserted']} inserts; "
            "each step a process, the default driver",
            f"`sync` full {s['sync full']} s ({r['sync full']}x the floor), incremental "
            f"{s['sync incremental']} s ({r['sync incremental']}x); `verify` EQUAL in "
            f"{s['verify']} s; `line_items` null in {doc['checks']['rows with line_items null']} "
            f"rows",
            f"each `sync` under {doc['target_seconds']:.0f} s, no traceback",
            _met(doc["target_met"]),
        )
    ]


SECTIONS: list[tuple[str, Callable[[dict], list[Row]]]] = [
    ("ingest_full_export", ingest),
    ("memory", memory),
    ("incremental_apply", apply),
    ("apply_cost", apply_cost),
    ("apply_process", apply_process),
    ("buckets", buckets),
    ("daily_sync", daily),
    ("freshness", freshness),
    ("tick_profile", tick_profile),
    ("merge_cost", merge_cost),
    ("merge_tables", merge_tables),
    ("maintenance", maintenance),
    ("detect_schema", detect),
    ("export_to_final", export_to_final),
    ("design_floor", design_floor),
    ("single_table", single_table),
    ("first_load_profile", first_load_profile),
    ("small_commands", small_commands),
    ("verify_cost", verify_cost),
    ("history_cost", history_cost),
    ("decoder_probe", decoder_probe),
    ("migration", migration),
    ("deep_items", deep_items),
    ("invoices", invoices),
]


def table() -> str:
    rows: list[Row] = []
    commands = []
    for name, render in SECTIONS:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        doc = json.loads(path.read_text())
        try:
            rows += render(doc)
        except KeyError as exc:  # a result file written by an older version of the benchmark
            print(f"report: {path.name} lacks {exc}; rerun its benchmark")
            continue
        machine = doc.get("machine", {})
        chart = path.with_suffix(".png")  # a profile draws none: name a chart only where one is
        drawn = f"; chart `bench/results/{chart.name}`" if chart.exists() else ""
        commands.append(
            f"- {name}: `{doc.get('command', '?')}` ({machine.get('cores')} cores, "
            f"{machine.get('memory_gb')} GB{drawn}); measured "
            f"{measured(name, doc.get('measured'))}"
        )
    lines = [
        "| benchmark | data | figure | target | |",
        "|---|---|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        "Commands (each result file also records the Spark settings):",
        "",
        *commands,
    ]
    return "\n".join(lines) + "\n"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def measured(name: str, stamp: dict | None = None) -> str:
    """When a figure was measured (date, commit) and "stale" when a later commit changed the code
    it measures. ``stamp``: what the run recorded (``results_file.measured``); without it, the
    last commit of the result file (results written before runs were stamped)."""
    try:
        if stamp:
            commit, day = stamp["commit"].rstrip("+"), stamp["date"]
        else:
            found = _git("log", "-1", "--format=%h %cs", "--", f"bench/results/{name}.json")
            if not found:
                return "not committed yet"
            commit, day = found.split()
        later = int(_git("rev-list", "--count", f"{commit}..HEAD", "--", *MEASURED))
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return "date unknown (no git history)"
    uncommitted = " on uncommitted changes" if stamp and stamp["commit"].endswith("+") else ""
    if name in RETIRED:
        return f"{day} ({commit}{uncommitted}); its script {RETIRED[name]}"
    stale = f"; **stale**: {later} later commit(s) changed the code it measures" if later else ""
    return f"{day} ({commit}{uncommitted}){stale}"


def _load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _load_rows(doc: dict) -> list[list[Any]]:
    rows = []
    for r in doc["runs"]:
        if r["table"] != "orders":
            continue
        s, ratio = r["seconds"], r["ratio_to_floor"]["sync"]
        target = doc["targets_ratio_to_floor"].get("sync")
        rows.append(
            [
                f"a full export of {_label(r['items'])} `orders` items to a queryable table",
                f"{s['sync']:.0f} s = **{ratio}x** the floor ({s['floor']:.0f} s: a typed read "
                f"of the export)" + (f"; target {target}x" if target else ""),
                "export_to_final",
                r.get("measured"),
            ]
        )
    return rows


def _headline_rows() -> list[list[Any]]:
    """[question, figure, result name, its run's stamp] for each question a user asks."""
    rows: list[list[Any]] = []
    final = _load("export_to_final")
    if final:
        rows += _load_rows(final)
    cost = _load("apply_cost")
    if cost:
        largest = max(cost["runs"], key=lambda r: r["table_rows"])
        for c in largest["cases"]:
            if c["case"] == "random":
                rows.append(
                    [
                        f"apply {c['changes']:,} changes to a {_label(largest['table_rows'])}-row "
                        "table (ingest, merge, tests)",
                        f"{c['apply_seconds']} s = **{c['ratio_to_floor']}x** a plain MERGE INTO "
                        f"({c['floor_merge_seconds']} s)",
                        "apply_cost",
                        cost.get("measured"),
                    ]
                )
    small = _load("merge_cost")
    many = _load("merge_tables")
    if small:
        m = small["median_seconds"]
        tables = (
            f"; {many['tables']} tables in one merge **{many['ten_over_one']}x** one (target "
            f"{many['target']}x: {'met' if many['met'] else 'not met'})"
            if many
            else ""
        )
        rows.append(
            [
                f"a small merge: {small['changes']} stream changes into {small['rows']:,} rows "
                "(warm, dbt run and its tests)",
                f"{m['now merge']:.1f} s = **{small['now_over_its_floor']}x** a plain MERGE INTO "
                f"({m['now floor']:.2f} s); {small['now_over_baseline']}x the merge at "
                f"{small['baseline']} (target {small['target']}x: "
                f"{'met' if small['met'] else 'not met'}){tables}",
                "merge_cost",
                small.get("measured"),
            ]
        )
    daily = _load("daily_sync")
    if daily:
        each = [s["ingest_seconds"] + s["merge_seconds"] for s in daily["steps"][1:]]
        rows.append(
            [
                f"a daily incremental export into {_label(daily['items'])} `orders` rows",
                f"at most {max(each):.0f} s each with its tests ({len(each)} incrementals)",
                "daily_sync",
                daily.get("measured"),
            ]
        )
    fresh = _load("freshness")
    if fresh:
        rows.append(
            [
                "a stream change visible in the final table (`watch`)",
                f"p95 {fresh['latency_s']['p95']} s at {fresh['rate_changes_per_s']} changes/s",
                "freshness",
                fresh.get("measured"),
            ]
        )
    maintained = _load("maintenance")
    if maintained:
        rows.append(
            [
                "reads that fail while `maintain` compacts and expires",
                f"{maintained['reader_failures']} of {maintained['reader_reads']:,} reads",
                "maintenance",
                maintained.get("measured"),
            ]
        )
    measured_memory = [r for r in (final or {}).get("runs", []) if "peak_driver_rss_mb" in r]
    if final and measured_memory:
        r = max(measured_memory, key=lambda r: r["items"])
        step, rss = max(r["peak_driver_rss_mb"].items(), key=lambda kv: kv[1])
        rows.append(
            [
                f"driver memory, a full export of {_label(r['items'])} items",
                f"every step within a {final['driver_memory']} heap; largest JVM resident set "
                f"{rss:.0f} MB ({step})",
                "export_to_final",
                r.get("measured"),
            ]
        )
    return rows[:HEADLINE_ROWS]


def headline() -> str:
    """The README's table: one figure per question, with when it was measured."""
    lines = ["| question | figure | measured |", "|---|---|---|"]
    rows = _headline_rows()
    lines += [f"| {q} | {figure} | {measured(name, stamp)} |" for q, figure, name, stamp in rows]
    return "\n".join(lines) + "\n"


def replace_between(path: Path, start: str, end: str, text: str) -> None:
    """Put ``text`` between the two markers of ``path`` (left as is without them)."""
    page = path.read_text()
    if start in page and end in page:
        head, rest = page.split(start, 1)
        _, tail = rest.split(end, 1)
        path.write_text(f"{head}{start}\n{text}{end}{tail}")


def main() -> int:
    text = table()
    (RESULTS / "summary.md").write_text(text)
    replace_between(PERFORMANCE, START, END, text)
    replace_between(README, HEADLINE_START, HEADLINE_END, headline())
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
