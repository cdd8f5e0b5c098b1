"""Subcommands of `python -m core`, one module each (see core/__main__.py)."""
