"""OpenAI-compatible endpoints (``/v1/``): any OpenAI client talks to a Neta agent, and its
turns, edits and regenerations become branches of the session tree (docs/api.md,
"OpenAI-compatible endpoints").

A room above ``api``: it authenticates, throttles and checks access as the REST API does,
starts ordinary runs through the runs services, follows them on the channel layer as the
websocket gateway does, and renders what the tree holds in OpenAI's shapes.
"""
