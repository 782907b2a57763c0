"""Agents, models, runs, integration tokens and sessions in the staff console, a module per
resource. Every write to a session, a run or a token goes through the service the API uses
(docs/console.md); what has no service is not offered. Importing the package registers them
(Django's admin autodiscovery imports ``runtime.admin``)."""

from runtime.admin import agents, models, runs, sessions, tokens  # noqa: F401 - each registers its admins
