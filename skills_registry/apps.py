from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SkillsRegistryConfig(AppConfig):
    name = "skills_registry"
    verbose_name = _("Skill registry")

    def ready(self) -> None:
        # No database access here (Django warns about queries in ready()); the
        # start-up sync is ``services.skills_startup_sync``, called by the run command.
        from skills_registry import checks  # noqa: F401 - registers the system checks
        from skills_registry.tools import register_skill_tools  # app code loads in ready(), once every app's models are

        register_skill_tools()

        from django.db.models.signals import post_delete, post_save  # app code loads in ready(), once every app's models are

        from skills_registry.models import SkillResource  # app code loads in ready(), once every app's models are

        # A skill row's change is a new catalog version (toolcatalog/catalog_version.py):
        # processes that keep the skill index at the old one read the rows again.
        for signal in (post_save, post_delete):
            signal.connect(_bump, sender=SkillResource, dispatch_uid=f"skills-version-{signal is post_save}")


def _bump(sender, **kwargs) -> None:
    from toolcatalog.catalog_version import bump  # app code loads in ready(), once every app's models are

    bump()
