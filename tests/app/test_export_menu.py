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
    assert [n for n, _ in collected] == ["attention_L1"]  # only the open tab runs, so only its charts are offered
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
