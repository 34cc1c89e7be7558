"""Sample data in AWS's exact layout (full and incremental exports, stream change files, a
single-table design), the expected final state computed from it in plain Python, and the demo
that runs the whole flow on it."""
