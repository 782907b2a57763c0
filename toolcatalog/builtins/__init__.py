"""Builtin tools (Pi's names and arguments). Importing this package registers them."""
