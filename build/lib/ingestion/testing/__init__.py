"""TEST-ONLY hooks. Nothing here acts unless a test sets its environment variable.

``faults``: ``LAKEHOUSE_FAULT=<point>`` kills the process at a named point (the crash tests of
``make test-faults``). Production code calls ``faults.point(...)``, which is a no-op otherwise.

May import: the standard library only.
"""
