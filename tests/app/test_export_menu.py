"""AppTest: every exported chart offers "HTML (interactive, offline)", and the page's PDF report holds exactly the
charts the page offered for export, one PDF page each (read back with pypdf)."""

from __future__ import annotations

import io

from core.charts import chart_html


def test_attention_page_offers_html_and_a_pdf_report(tiny_bert_dir, make_app):
    at = make_app(str(tiny_bert_dir), "the cat sat on the mat .")
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception
    labels = [b.label for b in at.get("download_button")]
    collected = at.session_state["_page_report.charts"]
    # only the open tab runs, so only its charts are offered; the tiny model's default layer is its last, shown as 2
    assert [n for n, _ in collected] == ["attention_L2"]
    assert labels.count("HTML (interactive, offline)") == labels.count("PNG") == len(collected)
    assert labels[-1] == "PDF report of this page (1 chart)"
    # the HTML file of the head view holds the same spec the page draws
    name, chart = collected[0]
    assert name.startswith("attention_L")
    assert chart.to_dict()["datasets"] and "vegaEmbed" in chart_html(chart)

    from pypdf import PdfReader

    from core.report import report_pdf

    pdf = PdfReader(io.BytesIO(report_pdf([(n, c, n) for n, c in collected])))
    assert len(pdf.pages) == len(collected)
    assert name in pdf.pages[0].extract_text()


def test_a_page_without_charts_has_no_report_button(tiny_bert_dir, make_app):
    at = make_app(str(tiny_bert_dir), "")
    at.switch_page("app_pages/attention.py").run()
    assert not at.exception
    assert not [b for b in at.get("download_button") if b.label.startswith("PDF report")]


def test_report_counts_every_chart_drawn_once():
    """Two charts shown, one of them also offered for export: the report has both, each once."""
    from streamlit.testing.v1 import AppTest

    def page():
        import altair as alt
        import pandas as pd

        from app_pages.widgets.common import draw_chart, export_buttons
        from app_pages.shell.page_report import page_report

        with page_report("Two charts"):
            first = alt.Chart(pd.DataFrame({"x": [1, 2]}), title="first").mark_bar().encode(x="x:Q")
            second = alt.Chart(pd.DataFrame({"y": [3, 4]}), title="second").mark_bar().encode(x="y:Q")
            draw_chart(first)
            export_buttons(first, None, "first-export", key="first")
            draw_chart(second)

    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception
    assert [n for n, _ in at.session_state["_page_report.charts"]] == ["first-export", "second"]
    assert [b.label for b in at.get("download_button")][-1] == "PDF report of this page (2 charts)"
