"""``manage.py runserver`` served by Daphne, as Channels' own runserver does.

Daphne's command module is imported only when this command runs: Daphne is not one of the
installed apps (``neta/settings.py`` says why)."""

from daphne.management.commands.runserver import Command as DaphneRunserver


class Command(DaphneRunserver):
    pass
