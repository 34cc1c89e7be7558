# dynamodb-lakehouse: `make demo` runs the pipeline on the embedded default, `make test` the tests.
# Every target installs what it needs first (Debian packages if missing, .venv, jars).

VENV ?= .venv
BIN := $(VENV)/bin
export SPARK_LOCAL_IP := 127.0.0.1

.DEFAULT_GOAL := help
.PHONY: help setup demo test test-faults test-fast lint bench package clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

setup: ## install Java/SQLite JDBC if missing, create .venv, install pinned packages and jars
	@bash scripts/setup.sh

demo: setup ## sample exports -> spark-submit ingest -> dbt run + dbt test -> report and a query
	$(BIN)/ddb-lakehouse demo

# The suite's budget: `make test` says how long it took against it (docs/development.md, "The
# suite's budget", says how a new test stays inside it).
TEST_BUDGET_MINUTES := 15

test: setup ## the test suite (real Spark, Iceberg and dbt), without the fault-injection suite
	@start=$$(date +%s); status=0; $(BIN)/pytest -m "not faults" --durations=25 || status=$$?; \
	seconds=$$(( $$(date +%s) - start )); budget=$$(( $(TEST_BUDGET_MINUTES) * 60 )); \
	echo "make test: $$(( seconds / 60 )) min $$(( seconds % 60 )) s of its $(TEST_BUDGET_MINUTES)-minute budget ($$(( seconds * 100 / budget ))%)"; \
	if [ $$seconds -gt $$budget ]; then echo "make test: OVER BUDGET: docs/development.md, \"The suite's budget\", says where the time goes and how a test stays inside it"; fi; \
	exit $$status

test-faults: setup ## kill -9 at every point of an export's way (also on a single-table design), and concurrent ingests (about 20 min)
	$(BIN)/pytest -m faults

test-fast: setup ## only the tests that need no Spark
	$(BIN)/pytest -m "not slow"

lint: setup ## ruff, mypy, the import contract (import-linter) and sqlfluff on models/ and macros/
	$(BIN)/ruff check ingestion tests bench
	$(BIN)/ruff format --check ingestion tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	LAKEHOUSE_HOME=$(CURDIR)/.lakehouse-lint $(BIN)/ddb-lakehouse init >/dev/null
	LAKEHOUSE_HOME=$(CURDIR)/.lakehouse-lint $(BIN)/sqlfluff lint models macros

bench: setup ## benchmarks (not part of CI, about 3 hours on 2 cores); bench/results/ + README table
	$(BIN)/python bench/export_to_final.py
	$(BIN)/python bench/apply_cost.py
	$(BIN)/python bench/buckets.py
	$(BIN)/python bench/daily_sync.py
	$(BIN)/python bench/freshness.py
	$(BIN)/python bench/merge_cost.py
	$(BIN)/python bench/merge_tables.py
	$(BIN)/python bench/maintenance.py
	$(BIN)/python bench/detect_schema.py
	$(BIN)/python bench/deep_items.py
	$(BIN)/python bench/invoices.py
	$(BIN)/python bench/report.py

package: setup ## dist/: the Lambda function's zip and the EMR job's project.zip and decoder jar (see README, On AWS)
	$(BIN)/ddb-lakehouse emr package --out dist

clean: ## remove the embedded lakehouse and dbt's output (keeps .venv)
	rm -rf .lakehouse .lakehouse-lint target logs
