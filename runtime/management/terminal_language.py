"""The language of a command's messages: the terminal's (``LANGUAGE``, ``LC_ALL``,
``LC_MESSAGES``, ``LANG``, as gettext reads them: ``zh_CN.UTF-8`` is Simplified Chinese),
one of ``LANGUAGES``, else English. What the model writes is never translated."""

from __future__ import annotations

import os

from django.conf import settings
from django.utils import translation


def terminal_language() -> str:
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name, "")
        for part in value.split(":"):  # LANGUAGE may list several
            code = part.split(".")[0].split("@")[0].replace("_", "-").lower()
            if code in ("", "c", "posix"):
                continue
            try:
                return translation.get_supported_language_variant(code)
            except LookupError:
                continue
        if value:
            break  # the first one set decides, as gettext does
    return settings.LANGUAGE_CODE
