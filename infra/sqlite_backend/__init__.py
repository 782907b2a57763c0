"""Django's SQLite backend with the process's writers queued in Python (see ``base.py``)."""
