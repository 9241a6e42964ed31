"""SAM's client: the `sam` command line (`client.cli`) and a small Python SDK (`client.sdk`).

It depends only on click, httpx and PyYAML and never imports the server, the database, Celery or
torch, so it installs light on a login node. Server-side subcommands (`sam server`, `sam up`, ...)
are plugins found through the `sam.commands` entry points (`client.plugins`).
"""
