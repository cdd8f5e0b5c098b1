"""README stays a page a teacher can read (issue 48): at most 12 KB, one line per page of the registry, each line
linking the page's own document in docs/pages/, which names the page's title, its screenshot and every
command-line twin the registry gives it."""

import re
from pathlib import Path

from core import views

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = ROOT / "docs" / "pages"


def readme_rows() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| page | what it shows |"):].split("\n\n", 1)[0].splitlines()[2:]
    return {re.match(r"\| ([^|]+?) \|", row)[1]: row for row in table}


def test_the_readme_fits_in_12_kb():
    assert README.stat().st_size <= 12 * 1024, README.stat().st_size


def test_the_readme_table_lists_every_view_once_by_its_title():
    rows = readme_rows()
    titles = [re.match(r"\| ([^|]+?) \|", row)[1] for row in rows.values()]
    assert len(titles) == len(set(titles)) == len(rows)
    assert sorted(titles) == sorted(view.title for view in views.all_views())


def test_each_readme_line_is_one_short_line_linking_its_page_document():
    rows = readme_rows()
    for view in views.all_views():
        row = rows[view.title]
        assert f"(docs/pages/{view.name}.md)" in row, view.name
        assert len(row) <= 220, f"{view.title}: the README line is a paragraph again ({len(row)} characters)"


def test_docs_hold_one_page_per_view_with_its_screenshot_and_commands():
    names = {view.name for view in views.all_views()}
    assert {path.stem for path in PAGES.glob("*.md")} == names
    for view in views.all_views():
        text = (PAGES / f"{view.name}.md").read_text(encoding="utf-8")
        assert text.startswith(f"# {view.title}\n"), view.name
        assert f"](../img/{view.name}.png)" in text, view.name
        assert (ROOT / "docs" / "img" / f"{view.name}.png").is_file(), f"docs/img/{view.name}.png is missing"
        for command in views.commands_of(view.name):
            assert f"python -m core {command} " in text, f"docs/pages/{view.name}.md does not name {command}"


def test_every_relative_link_in_readme_and_docs_points_at_a_file():
    for path in [README, *ROOT.glob("docs/**/*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)} links {target}, which is not there"
