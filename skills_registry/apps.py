from django.apps import AppConfig


class SkillsRegistryConfig(AppConfig):
    name = "skills_registry"
    verbose_name = "Skills"

    def ready(self) -> None:
        # No database access here (Django warns about queries in ready()); the
        # start-up sync is ``services.skills_startup_sync``, called by the run command.
        from skills_registry import checks  # noqa: F401 - registers the system checks
        from skills_registry.tools import register_skill_tools

        register_skill_tools()
