"""The client's own `sam` subcommands (the server-side ones arrive as plugins)."""
