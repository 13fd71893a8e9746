"""Robot side: the weightless `--inference.type=remote` backend and its fail-safe link."""
