"""Command-line entry point (placeholder until the subcommands land)."""


def main(argv: list[str] | None = None) -> int:
    return 0
