"""Static files for long-lived caching (docs/chat.md, "Static files and caching").

``collectstatic`` (``make run`` and ``make test`` run it) copies every static file into
``STATIC_ROOT`` under a content-hashed name next to its own (``chat.3f2a9c1e04b7.css``)
with gzip copies (WhiteNoise's ``CompressedManifestStaticFilesStorage``: the manifest, the
hashing and the compression, kept by a well-used library), and first writes
``chat/bundle.js``, the chat page's modules as one file (``neta/chat_bundle.py``). Hashed
names never change content, so they are served ``Cache-Control: public, max-age=315360000,
immutable`` (``neta/static_serving.py``); relative imports in the modules that stay modules
(the console's live tree) are rewritten to hashed names too (Django's JS module import
rewriting).

Without a collected manifest (a fresh clone before ``collectstatic``, the test process) the
same storage gives the plain names and the page loads its modules one by one from the
source tree, revalidated on every load: slower, never stale.
"""

from __future__ import annotations

import logging

from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.files.base import ContentFile
from whitenoise.storage import CompressedManifestStaticFilesStorage

from neta.chat_bundle import bundle

logger = logging.getLogger(__name__)

BUNDLE = "chat/bundle.js"
BUNDLE_ENTRY = "chat/main.js"


class ChatStaticStorage(CompressedManifestStaticFilesStorage):
    support_js_module_import_aggregation = True
    manifest_strict = False
    # Source maps and their comments are not shipped with the vendored files.
    keep_only_hashed_files = False

    def post_process(self, paths, dry_run=False, **options):
        if not dry_run:
            def read(path: str) -> str:
                found = finders.find(path)
                if not found:
                    raise FileNotFoundError(f"static file {path} not found (imported by the chat page)")
                with open(found, encoding="utf-8") as handle:
                    return handle.read()

            text = bundle(BUNDLE_ENTRY, read)
            if self.exists(BUNDLE):
                self.delete(BUNDLE)
            self.save(BUNDLE, ContentFile(text.encode("utf-8")))
            paths = {**paths, BUNDLE: (self, BUNDLE)}
        yield from super().post_process(paths, dry_run=dry_run, **options)

    def url_converter(self, name, hashed_files, template=None):
        # KaTeX's stylesheet names .woff and .ttf fonts beside the .woff2 ones that are
        # vendored (every browser takes woff2): a reference to a file that is not there
        # stays as it is instead of failing the whole collection.
        convert = super().url_converter(name, hashed_files, template)

        def tolerant(matchobj):
            try:
                return convert(matchobj)
            except ValueError:
                return matchobj.group("matched")

        return tolerant

    def stored_name(self, name):
        # Not collected yet (or a file added since): the plain name, served from the sources.
        try:
            return super().stored_name(name)
        except ValueError:
            return name

    def url(self, name, force=False):
        try:
            return super().url(name, force)
        except ValueError:
            return self.base_url + name if self.base_url else name


def collected(name: str) -> bool:
    """Whether ``name`` is in the collected manifest (the page then uses the bundle)."""
    try:
        return name in getattr(staticfiles_storage, "hashed_files", {})
    except Exception:  # a storage without a manifest
        return False
