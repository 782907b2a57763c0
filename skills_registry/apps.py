from django.apps import AppConfig


class SkillsRegistryConfig(AppConfig):
    name = "skills_registry"
