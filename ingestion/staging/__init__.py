"""Sources -> staging change logs: every export or stream batch appended to ``staging.<table>``
in one Iceberg commit that carries its ledger entry; the chain of exports, rejected stream lines
and drift."""
