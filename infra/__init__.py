"""The floor under every app: how Neta uses its database, threads and CPUs, knowing no app.

- ``prepared``: the hot statements compiled once per process and connection (the kernel's
  and the runtime's turn queries);
- ``sqlite_backend``: Django's SQLite backend with its statements' parameter form remembered;
- ``db_threads``: threads that keep their database connection from one job to the next;
- ``http_threads``: the web process's request threads;
- ``gc_tuning``: the collector's settings for a long-lived server or worker;
- ``cpu_pin`` / ``cpu_affinity``: the embedded server on one CPU, child processes on all;
- ``memo``: answers that cost file-system calls, reused for a few seconds.

Every app may import it; it imports none (the ``apps`` contract in pyproject.toml)."""
