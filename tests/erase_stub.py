"""Register the stand-in `layer_knowledge` view (tests/erase_view_stub) when core/views has none, so the erase
analysis's registry, CLI and lens twin load in a branch without that view; a no-op once the real view exists."""

from pathlib import Path

STUB = str(Path(__file__).parent / "erase_view_stub")


def install() -> None:
    import core.views as views

    if STUB in views.__path__ or any(v.name == "layer_knowledge" for v in views.all_views()):
        return
    views.__path__.append(STUB)


install()
