"""Subcommands that open the dashboard or talk to hosts; each module has register(subparsers)."""
