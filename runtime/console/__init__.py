"""The staff console's own pages inside the Django admin (docs/console.md): forms and views
thin over the rooms' selectors and services. Like ``admin.py`` it sits at the app's top."""
