"""The flows the commands run, each one function the CLI calls: stage, sync, export, merge, rebuild,
watch, and looking (status, query). They report as they go through the ``Reporter`` the caller
passes in (a plain callable where they say only lines), and hold a table through ``guard`` alone
(lock and lease)."""
