"""Views to take away: a lesson (or a page's charts) as one self-contained HTML deck, or as a PDF handout.

A step is `(title, chart, caption)` or `(title, chart, caption, notes)`: chart an altair chart, a Vega-Lite dict, or
None (a text-only slide, e.g. a lesson step whose view needs a trained run),
caption the plain text shown under it, notes the speaker's notes (in the deck only, hidden from the slide). Both
outputs are made offline: the deck inlines Vega/Vega-Lite/Vega-Embed once (vl-convert's bundle), the PDF places each
chart's vector PDF from vl-convert (pypdf) in a page laid out with fpdf2.
"""

from __future__ import annotations

# fpdf, pypdf, matplotlib and vl_convert imported in functions: only building a PDF or an image needs them.
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Iterable, Sequence

import altair as alt

from core import lens
from core.charts.export import javascript_bundle, offline_spec
from core.model.loading import ModelUnavailable, display_name
from core.safe_text import html_text, inline_script, script_json


@dataclass(frozen=True)
class Step:
    """One slide or page: a title, one chart, its caption, and the speaker's notes (deck only)."""

    title: str
    chart: alt.TopLevelMixin | dict | None
    caption: str = ""
    notes: str = ""


StepLike = Step | Sequence


def as_steps(steps: Iterable[StepLike]) -> list[Step]:
    """Accept Step objects or (title, chart, caption[, notes]) tuples."""
    out = []
    for step in steps:
        if isinstance(step, Step):
            out.append(step)
            continue
        if not 2 <= len(step) <= 4:
            raise ValueError("a step is (title, chart, caption[, notes])")
        out.append(Step(*[str(v) if i != 1 and v is not None else v for i, v in enumerate(step)]))
    if not out:
        raise ValueError("nothing to export: no steps")
    return out


DECK_STYLE = """
body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: #fff; color: #1a1a1a; }
section.slide { display: none; box-sizing: border-box; min-height: 100vh; padding: 3vh 4vw; }
section.slide.current { display: block; }
section.slide h1 { font-size: 2.2rem; margin: 0 0 2vh 0; }
section.slide .chart { overflow: auto; zoom: 1.5; }  /* slides are read from the back of a room */
section.slide p.caption { font-size: 1.25rem; max-width: 70em; line-height: 1.45; }
aside.notes { display: none; border-left: 4px solid #e8590c; padding: 0.5em 1em; background: #fff7f0; font-size: 1.05rem; }
body.show-notes aside.notes { display: block; }
body.show-notes aside.notes:empty { display: none; }
footer { position: fixed; bottom: 1vh; right: 2vw; color: #666; font-size: 0.95rem; }
"""

DECK_SCRIPT = """
(function () {
  const specs = JSON.parse(document.getElementById("deck-specs").textContent);
  const slides = Array.from(document.querySelectorAll("section.slide"));
  const drawn = new Set();
  let current = 0;
  function show(i) {
    current = Math.max(0, Math.min(slides.length - 1, i));
    slides.forEach((s, k) => s.classList.toggle("current", k === current));
    document.getElementById("deck-position").textContent = (current + 1) + " / " + slides.length;
    if (!drawn.has(current) && specs[current]) {
      drawn.add(current);
      // Drawn when first shown: a chart embedded into a hidden slide would size itself to nothing.
      vegaEmbed(slides[current].querySelector(".chart"), specs[current]).catch(console.error);
    }
    if (location.hash !== "#" + (current + 1)) history.replaceState(null, "", "#" + (current + 1));
  }
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowRight" || e.key === "PageDown" || e.key === " ") { show(current + 1); e.preventDefault(); }
    else if (e.key === "ArrowLeft" || e.key === "PageUp") { show(current - 1); e.preventDefault(); }
    else if (e.key === "Home") show(0);
    else if (e.key === "End") show(slides.length - 1);
    else if (e.key === "n" || e.key === "N") document.body.classList.toggle("show-notes");
  });
  show((parseInt(location.hash.slice(1), 10) || 1) - 1);
})();
"""


def deck_html(steps: Iterable[StepLike], title: str = "BERT Lens") -> str:
    """One self-contained HTML deck, a slide per step: arrow keys (or Page Up/Down, space) step through, N shows
    the speaker notes, which are hidden from the slide by default. Opens from disk with no network."""
    steps = as_steps(steps)
    sections = []
    for i, step in enumerate(steps):
        sections.append(
            f'<section class="slide" id="slide-{i + 1:d}"><h1>{html_text(step.title)}</h1>'
            f'<div class="chart"></div><p class="caption">{html_text(step.caption)}</p>'
            f'<aside class="notes">{html_text(step.notes)}</aside></section>'
        )
    specs = [None if step.chart is None else offline_spec(step.chart) for step in steps]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"UTF-8\">\n"
        f"<title>{html_text(title)}</title>\n<style>{DECK_STYLE}</style>\n"
        f"<script type=\"text/javascript\">\n{inline_script(javascript_bundle())}\n</script>\n</head>\n<body>\n"
        + "\n".join(sections)
        + '\n<footer><span id="deck-position"></span> · ← → to step, N for notes</footer>\n'
        f'<script type="application/json" id="deck-specs">{script_json(specs)}</script>\n'
        f"<script type=\"text/javascript\">{DECK_SCRIPT}</script>\n</body>\n</html>\n"
    )


# ---- PDF -------------------------------------------------------------------------------------------------------

def _unicode_font() -> Path | None:
    """A TTF with the characters captions use (‖, “”, →, ×); fpdf2's built-in fonts are Latin-1 only.
    matplotlib (pulled in by captum) ships DejaVu Sans, so an installed BERT Lens always has one."""
    candidates = []
    try:
        import matplotlib

        candidates.append(Path(matplotlib.__file__).parent / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf")
    except ImportError:
        pass
    candidates += [Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
                   Path("/usr/share/fonts/TTF/DejaVuSans.ttf")]
    return next((p for p in candidates if p.exists()), None)


def _chart_page(chart):
    """The chart as a one-page vector PDF (vl-convert; about 14× faster than a scale-2 PNG and sharp at any zoom)."""
    import vl_convert as vlc
    from pypdf import PdfReader

    return PdfReader(BytesIO(vlc.vegalite_to_pdf(offline_spec(chart)))).pages[0]


def report_pdf(steps: Iterable[StepLike], title: str = "BERT Lens") -> bytes:
    """A PDF handout, one landscape A4 page per step: its title, the chart (vector, scaled to fit, enlarged at most
    1.5×) and its caption. Speaker notes are left out. Made offline: fpdf2 lays out the text, pypdf places the
    chart's own PDF page (vl-convert) in the space left."""
    from fpdf import FPDF
    from pypdf import PdfReader, PdfWriter, Transformation

    steps = as_steps(steps)
    pdf = FPDF(orientation="landscape", unit="pt", format="A4")
    pdf.set_auto_page_break(False)
    pdf.set_title(title)
    pdf.set_creator("BERT Lens")
    font = _unicode_font()
    if font is not None:
        pdf.add_font("body", "", str(font))
        family, clean = "body", (lambda text: text)
    else:  # no TTF at all: Latin-1 with "?" for the rest, rather than no report
        family, clean = "helvetica", (lambda text: text.encode("latin-1", "replace").decode("latin-1"))
    margin = 34.0
    width = pdf.w - 2 * margin
    placements = []  # per page: (chart page, scale, x, y from the top) or None
    for step in steps:
        pdf.add_page()
        pdf.set_xy(margin, margin)
        pdf.set_font(family, size=16)
        pdf.multi_cell(width, 20, clean(step.title), new_x="LMARGIN", new_y="NEXT")
        top = pdf.get_y() + 8
        pdf.set_font(family, size=10)
        caption = clean(step.caption)
        if step.chart is None:
            if caption:
                pdf.set_xy(margin, top)
                pdf.multi_cell(width, 13, caption)
            placements.append(None)
            continue
        caption_height = pdf.multi_cell(width, 13, caption, dry_run=True, output="HEIGHT") if caption else 0
        room = pdf.h - margin - caption_height - 10 - top
        page = _chart_page(step.chart)
        box = page.mediabox
        w_pt, h_pt = float(box.width), float(box.height)
        scale = min(width / w_pt, room / h_pt, 1.5)
        x = margin + (width - w_pt * scale) / 2
        placements.append((page, scale, x, top))
        if caption:
            pdf.set_xy(margin, top + h_pt * scale + 10)
            pdf.multi_cell(width, 13, caption)
    writer = PdfWriter(clone_from=PdfReader(BytesIO(bytes(pdf.output()))))
    for target, placed in zip(writer.pages, placements):
        if placed is None:
            continue
        page, scale, x, top = placed
        box = page.mediabox
        # PDF space runs up from the bottom; fpdf2's (x, top) runs down from the top.
        y = float(target.mediabox.height) - top - float(box.height) * scale
        target.merge_transformed_page(
            page, Transformation().translate(-float(box.left), -float(box.bottom)).scale(scale, scale).translate(x, y))
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def lesson_steps(steps: Iterable[dict], draw=None) -> list[Step]:
    """A lesson's steps ({"title", "page", "params", "notes"}, core/lessons.py's format) drawn as deck/PDF steps:
    each view's charts through core.lens.view (one Step per chart, the first titled with the step's title), a
    text-only Step where the view draws nothing offline or cannot be drawn (the reason goes in the caption)."""
    draw = lens.view if draw is None else draw
    out: list[Step] = []
    for step in steps:
        title, notes = str(step.get("title") or step.get("page") or "Step"), str(step.get("notes") or "")
        try:
            drawn = draw(step.get("page", ""), step.get("params") or {})
        except ModelUnavailable as err:  # the reason names folders and commands: the speaker's notes, not the slide
            model = display_name(str((step.get("params") or {}).get("model") or "its model"))
            drawn, why = [], f"This step's model, “{model}”, cannot be loaded on this computer now."
            notes = f"{notes}\n\n{err}".strip()
        except Exception as err:  # a bad parameter or a missing dataset loses one slide, not the deck
            drawn, why = [], f"This view could not be drawn here: {err}"
        else:
            why = "Open this step in the app to see it." if not drawn else ""
        if not drawn:
            out.append(Step(title, None, why, notes))
        for i, (chart, caption) in enumerate(drawn):
            out.append(Step(title if i == 0 else f"{title} ({i + 1})", chart, caption, notes if i == 0 else ""))
    return out
