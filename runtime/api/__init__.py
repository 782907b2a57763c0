"""The REST API under ``/api/`` (DRF): sessions and their commands, agents, models,
tools, skills and runs. See ``docs/api.md``."""
