# Load the Celery app with Django so shared tasks bind to it (delay_on_commit).
from neta.celery import app as celery_app

__all__ = ("celery_app",)
