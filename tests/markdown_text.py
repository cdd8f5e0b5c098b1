"""Reading back what the pages show: user text reaches Markdown escaped by core.safe_text.markdown_text."""

import re

from core.safe_text import WORD_JOINER


def plain(markdown: str) -> str:
    """The text a reader sees of Markdown whose punctuation was backslash-escaped (the backslashes gone, and the
    invisible word joiners that keep addresses from becoming links)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace(WORD_JOINER, "")
