"""Issue 44, item 3: a parsed upload is never kept whole in a cross-session cache beyond a byte budget. The Dataset
explorer kept four parsed uploads of any size in st.cache_data (a 100 MB CSV left the server at 7.85 GB)."""

from __future__ import annotations

import ast
from pathlib import Path

from core.analyses import explorer as ex
from core.model.budget import BudgetCache, text_bytes

APP_PAGES = Path(__file__).resolve().parents[2] / "app_pages"
MB = 2 ** 20


def _table(rows: int) -> bytes:
    return ("text,label,source\n" + "".join(f"Example sentence number {k} is here.,{k % 3},file {k}\n"
                                            for k in range(rows))).encode()


def test_no_st_cache_data_function_takes_a_file():
    """st.cache_data bounds entries, not bytes, and unpickles a copy into every rerun: no function it wraps may
    take an upload's bytes (they go through corpus_picker.parsed_upload / keep_parsed instead)."""
    found = []
    for path in APP_PAGES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            cached = any("cache_data" in ast.unparse(d) for d in node.decorator_list)
            takes_bytes = any(a.annotation is not None and "bytes" in ast.unparse(a.annotation) for a in node.args.args)
            if cached and takes_bytes:
                found.append(f"{path.relative_to(APP_PAGES.parent)}:{node.lineno} {node.name}")
    assert not found, found


def test_the_explorers_upload_is_kept_only_within_the_byte_budget(monkeypatch):
    from app_pages.widgets import corpus_picker

    budget = BudgetCache(1 * MB, max_entries=8, sizeof=text_bytes)
    monkeypatch.setattr(corpus_picker, "_UPLOADS", budget)
    big, small = _table(20_000), _table(50)  # 0.9 MB of file, several MB parsed; a few KB
    examples = corpus_picker.parsed_upload("big.csv", big, ex.examples_from_upload)
    assert len(examples) == 20_000 and examples.labels[:3] == ("0", "1", "2")
    assert text_bytes(examples) > 1 * MB  # parsed, it outgrows its file and the budget
    assert len(budget) == 0 and budget.total_bytes == 0  # used once, not kept
    first = corpus_picker.parsed_upload("small.csv", small, ex.examples_from_upload)
    again = corpus_picker.parsed_upload("small.csv", small, ex.examples_from_upload)
    assert again is first and len(budget) == 1  # a small one is kept, shared, not copied
    assert 0 < budget.total_bytes <= 1 * MB
    assert not any(isinstance(part, bytes) for key in budget.keys() for part in key)  # the file itself is not kept


def test_text_bytes_counts_the_strings():
    """An independent count: the strings' own sizes (sys.getsizeof) are a lower bound of text_bytes."""
    import sys

    texts = tuple(f"sentence {k}" for k in range(1000))
    assert text_bytes(texts) >= sum(sys.getsizeof(t) for t in texts) + sys.getsizeof(texts)
