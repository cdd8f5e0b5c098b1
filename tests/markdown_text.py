"""Reading back what the pages show: user text reaches Markdown escaped by core.safe_text.markdown_text."""

import re


def plain(markdown: str) -> str:
    """The text a reader sees of Markdown whose punctuation was backslash-escaped (the backslashes gone)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)
