"""Dataset explorer: a projector over a whole corpus with slices, and the nearest contexts of a word."""

from core.analyses.explorer import ANALYSIS as PROJECT
from core.analyses.vector_index import ANALYSIS as NEIGHBOURS
from core.views import Param, View, analysis_params

# The page's tabs, each with the analyses (core.contract, by registry name) it shows: app_pages/explorer.py draws
# its switch from these titles.
TABS: tuple[tuple[str, tuple[str, ...]], ...] = (("Projector", ("project",)), ("Nearest contexts", ("neighbours",)))
TAB_TITLES = tuple(title for title, _ in TABS)

VIEW = View(
    name="explorer",
    title="Dataset explorer",
    url_path="explorer",
    icon=":material/travel_explore:",
    page="app_pages/explorer.py",
    order=80,
    summary="Every example of a dataset as one point, coloured by label or prediction, with selections saved as "
            "slices to compare. A second tab finds the places in a corpus where the model treats a word most like "
            "your word.",
    params=(
        Param("tab", "explorer.tab", "str", TAB_TITLES[0], TAB_TITLES),
        Param("corpus", "explorer.source", "str"),
        Param("n", "explorer.n", "int", low=10, high=5000),
        *analysis_params(PROJECT, "explorer."),  # layer, method, pooling: made from ProjectSettings
        Param("second", "explorer.second", "str"),
        Param("colour", "explorer.colour", "str"),
        Param("words", "explorer.words", "str"),
        Param("word", "explorer.word", "str"),
        *analysis_params(NEIGHBOURS, "explorer.", keys={"layer": "explorer.nlayer"}),  # neighbours_layer, k
        Param("neighbours_corpus", "explorer.nsource", "str"),
        Param("neighbours_n", "explorer.nn", "int", low=50, high=20000),
    ),
)
