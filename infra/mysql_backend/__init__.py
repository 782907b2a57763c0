"""Django's MySQL/MariaDB backend with a bounded pool of connections per process (see ``base.py``)."""
