"""The view registry: every view of the app (a page, its URL settings, its CLI commands, its charts) registered once.

Each module of this package defines `VIEW = View(...)`; `all_views()` finds them (pkgutil over the package's
`__path__`, no hand-kept list), so a new view is one new module plus its page script. Generated from the registry:
the router's navigation (app_pages/shell/router.py), the Home page's list, `core.lens.view` (a lesson step's charts),
presenter mode's prefetch (app_pages/shell/prefetch.py) and `python -m core views`.

Pure (no streamlit, no torch at import: `python -m core views` starts fast): app_pages/shell/url_state.py is the glue
that reads st.query_params into the widgets' session state and writes them back. A page's view is (page url_path,
{url param: str}); lessons (core/lessons.py) store steps in exactly that form, so parse() here is also what checks a
lesson's step.

A parameter names the widget's session-state key, a type, the default the page starts from (None: the page
picks it, e.g. a layer that depends on the model) and, where the options do not depend on the model or data,
the allowed values. Values that do not parse or are not allowed are dropped with a notice, never an error.

Layers in a URL are numbered as every chart shows them (core.numbering: 0 = the embeddings, 1..L = the transformer
layers): a transformer layer's widget holding its array index says so with HEAD_LAYER (`shown` = 1), so the link reads
the same number as the page.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from core.contract import Analysis, SettingField, analyses_in

# The shared sidebar's params (app_pages/shell/router.py): every page has them; they are not repeated per page.
SHARED = {"model": "model", "a": "sentence_a", "b": "sentence_b"}
TYPES = ("str", "int", "float", "bool", "ints", "strs")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# Params the app itself adds to a URL (Streamlit's embed options), never reported as unknown.
IGNORED = frozenset({"embed", "embed_options"})
# CLI subcommands that belong to no view: the foundation's tools (`python -m core views` lists them apart).
UTILITIES = ("models", "download", "encode", "runs", "cancel", "views")


@dataclass(frozen=True)
class Param:
    """One URL parameter: `name` in the URL, `key` of the widget in st.session_state, `type` one of TYPES
    ("ints"/"strs": comma-separated lists), `default` (None: the page decides), `choices` (None: any value of
    the type; for a list type, each element must be one), `low`/`high` inclusive bounds for int/float (of the URL's
    number), `shown` what the URL adds to an int the widget holds (1: a transformer layer's array index, written in
    the URL as its layer number 1..L, core.numbering)."""

    name: str
    key: str
    type: str = "str"
    default: Any = None
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    shown: int = 0
    aliases: tuple[tuple[str, Any], ...] = ()  # (spelling, value) pairs a link may also use (an analysis's aliases)

    def parse(self, raw: str) -> Any:
        """The typed value of a URL string; ValueError with a plain reason when it does not fit."""
        if self.aliases:
            spelled = dict(self.aliases)
            raw = ",".join(str(spelled.get(part, part)) for part in raw.split(",")) if self.type in ("ints", "strs") \
                else str(spelled.get(raw, raw))
        if self.type == "str":
            value: Any = raw
        elif self.type == "int":
            value = int(raw)
        elif self.type == "float":
            value = float(raw)
        elif self.type == "bool":
            if raw.lower() not in _TRUE + _FALSE:
                raise ValueError(f"{raw!r} is not true/false")
            value = raw.lower() in _TRUE
        elif self.type in ("ints", "strs"):
            parts = [p for p in raw.split(",") if p != ""]
            value = [int(p) for p in parts] if self.type == "ints" else parts
        else:  # pragma: no cover - guarded by the registry test
            raise ValueError(f"unknown type {self.type}")
        items = value if isinstance(value, list) else [value]
        for item in items:
            if self.choices is not None and item not in self.choices:
                raise ValueError(f"{item!r} is not one of {', '.join(map(str, self.choices))}")
            if self.low is not None and item < self.low or self.high is not None and item > self.high:
                raise ValueError(f"{item!r} is outside {self.low}…{self.high}")
        return value - self.shown if self.type == "int" else value

    def encode(self, value: Any) -> str:
        """The URL string of a value (the inverse of parse for every allowed value)."""
        if self.type == "bool":
            return "true" if value else "false"
        if self.type in ("ints", "strs"):
            return ",".join(str(v) for v in value)
        return str(value + self.shown) if self.type == "int" else str(value)


def corpus_params(prefix: str, n_key: str | None = None, url: str = "") -> tuple[Param, ...]:
    """The corpus picker's source, split and sample size (app_pages/widgets/corpus_picker.py keys)."""
    return (
        Param(f"{url}corpus", prefix + "source", "str"),
        Param(f"{url}split", prefix + "split", "str"),
        Param(f"{url}n", n_key or prefix + "dataset_limit", "int", low=1, high=10_000),
    )


LAYER = dict(type="int", low=0, high=128)  # a hidden_states layer: 0 = the embeddings
# A transformer layer (its attention and heads) whose widget holds the array index: the URL says 1..L.
HEAD_LAYER = dict(type="int", low=1, high=128, shown=1)
HEADS = dict(type="ints", low=0, high=256)
LIMIT = dict(type="int", low=0, high=10_000_000)


@dataclass(frozen=True)
class Planned:
    """A corpus pass presenter mode submits ahead for a lesson step: `key` the page's job key, `params` what the
    page keys that job by (the page adopts the job only for equal params), `make_work()` the core.jobs work (None:
    already measured), `kind` and `unit` of the job."""

    key: str
    params: Any
    make_work: Callable[[], Callable] | None
    kind: str
    unit: str


@dataclass(frozen=True)
class Caches:
    """What a view's `plan` takes from the app, so a prepared pass shares the pages' caches: `load_model(ref)`,
    `resolve_corpus(spec)` and `shared_results(view name)` (a core.shared.SharedResults every session reads)."""

    load_model: Callable[[str], Any]
    resolve_corpus: Callable[[str], Any]
    shared_results: Callable[[str], Any]


@dataclass(frozen=True)
class View:
    """One view of the app, registered once (a module of core/views/ defines `VIEW = View(...)`).

    `name` the registry's name; `title`, `icon` and `url_path` ("" for Home) its navigation entry; `page` its
    script, relative to the repository root; `order` its place in the navigation; `summary` the Home page's two
    plain sentences; `params` its URL settings (the `python -m core` subcommands it owns are its analyses',
    `commands_of`);
    `plan(params, caches) -> Planned | None` what presenter mode prepares ahead for a lesson step with these URL
    params (None: the view has no long work); `charts(lens, model, a, b, params) -> [(chart, caption), ...]` the
    step's charts for a notebook (`lens` is core.lens, passed in so no view module imports it; None: no charts);
    `lesson_step` whether a lesson step can show the view (not the lesson pages themselves); `declared_tabs`
    whether its page adds a tab for each analysis declared with a `tab` (app_pages/widgets/analysis_tab.page_tabs),
    whose settings then join its URL params (declared_params)."""

    name: str
    title: str
    url_path: str
    icon: str
    page: str
    order: int
    summary: str = ""
    params: tuple[Param, ...] = ()
    plan: Callable[[Mapping[str, str], Caches], Planned | None] | None = None
    charts: Callable[..., list] | None = None
    lesson_step: bool = True
    declared_tabs: bool = False


_found: dict[tuple[str, ...], tuple[View, ...]] = {}


def all_views() -> tuple[View, ...]:
    """Every registered view in navigation order: the `VIEW` of each module found on this package's `__path__`
    (read on each call, so a test may add a folder to it)."""
    where = tuple(__path__)
    if where not in _found:
        found = [importlib.import_module(f"{__name__}.{info.name}").VIEW
                 for info in pkgutil.iter_modules(__path__) if not info.ispkg]
        names = [v.name for v in found]
        paths = [v.url_path for v in found]
        if len(set(names)) != len(names) or len(set(paths)) != len(paths):
            raise ValueError(f"two views share a name or url_path: {sorted(names)} / {sorted(paths)}")
        _found[where] = tuple(sorted(found, key=lambda v: (v.order, v.name)))
    return _found[where]


# Where analyses are declared (`ANALYSIS` / `ANALYSES` in any module of these packages, core.contract). Walking
# them imports torch (core.training, core.bias): only the CLI, core.lens, `views --json` and tests call
# all_analyses(); the router and the view modules never do, so the app's first page does not wait for it.
ANALYSIS_PACKAGES = ("core.analyses", "core.training", "core.bias", "core.studies")
_analyses: dict[tuple, tuple[Analysis, ...]] = {}


def all_analyses(packages: Sequence[str] = ANALYSIS_PACKAGES) -> tuple[Analysis, ...]:
    """Every declared analysis, in view order then each view's tab order; ValueError when two share a name,
    a command or a lens function, or one names a view that is not registered."""
    # Keyed by each package's __path__ too: a test adds a folder to core.analyses.__path__ (a throw-away analysis).
    key = tuple((name, tuple(importlib.import_module(name).__path__)) for name in packages)
    if key not in _analyses:
        found: list[Analysis] = []
        for package_name in packages:
            package = importlib.import_module(package_name)
            found.extend(analyses_in(package))
            for info in pkgutil.walk_packages(package.__path__, package_name + "."):
                found.extend(analyses_in(importlib.import_module(info.name)))
        found = list({id(a): a for a in found}.values())  # a package re-exporting its module's ANALYSIS
        for attribute in ("name", "command", "lens"):
            values = [getattr(a, attribute) for a in found]
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"two analyses share a {attribute}: {twice}")
        order = {v.name: i for i, v in enumerate(all_views())}
        strays = [a.name for a in found if a.view not in order]
        if strays:
            raise ValueError(f"analyses naming no registered view: {strays}")
        _analyses[key] = tuple(sorted(found, key=lambda a: (order[a.view], a.order, a.name)))
    return _analyses[key]


def analysis(name: str) -> Analysis:
    """The analysis of a registry name or of its CLI command; KeyError for neither."""
    for found in all_analyses():
        if name in (found.name, found.command):
            return found
    raise KeyError(name)


def analyses_of(view: str) -> tuple[Analysis, ...]:
    """A view's analyses (its tabs), in their order."""
    return tuple(a for a in all_analyses() if a.view == view)


def commands_of(view: str) -> tuple[str, ...]:
    """The `python -m core` subcommands a view owns: its analyses' (no list kept by hand)."""
    return tuple(a.command for a in analyses_of(view))


def analysis_params(analysis: Analysis, prefix: str, *, only: Sequence[str] | None = None,
                    keys: Mapping[str, str] | None = None) -> tuple[Param, ...]:
    """The URL parameters of an analysis's settings, made from its declaration: the setting's URL name, the
    widget's session key `prefix + field name` (or `keys[field name]`), its type, default, bounds and choices.
    `only`: these settings, in this order (default: every setting with a URL name)."""
    fields = {f.name: f for f in analysis.fields}
    names = list(only) if only is not None else [f.name for f in analysis.fields if f.url_name is not None]
    return tuple(_param_of(fields[name], (keys or {}).get(name, prefix + name)) for name in names)


def _param_of(f: SettingField, key: str) -> Param:
    default = list(f.default) if isinstance(f.default, tuple) else f.default
    if f.url_name is None:
        raise ValueError(f"setting {f.name} has no URL name")
    low = f.meta.low + f.meta.shown if f.meta.low is not None else None
    high = f.meta.high + f.meta.shown if f.meta.high is not None else None
    return Param(f.url_name, key, f.type, default, f.meta.choices, low, high, f.meta.shown,
                 tuple(f.meta.aliases.items()))


def get(page: str) -> View:
    """The view of a url_path ("" or "/" for Home) or of a registry name; KeyError for neither."""
    page = page.strip("/")
    for view in all_views():
        if page in (view.url_path, view.name):
            return view
    raise KeyError(page)


def is_view(page: str) -> bool:
    """Whether a url_path ("" or "/" for Home) or name is a registered view."""
    try:
        get(page)
    except KeyError:
        return False
    return True


def step_pages() -> tuple[str, ...]:
    """The url_paths a lesson step can show: every view's but the lesson pages'."""
    return tuple(v.url_path for v in all_views() if v.lesson_step)


def page_file(page: str) -> str:
    """The script of a page, relative to the repository root (presenter mode runs it inside its slide)."""
    return get(page).page


def flag(params: Mapping[str, str], name: str, default: bool = False) -> bool:
    """A URL's bool read leniently (a lesson step's charts): empty or absent is the default."""
    value = params.get(name)
    return default if value in (None, "") else str(value).lower() in _TRUE


def ints(value, default: Sequence[int]) -> list[int]:
    """A URL's comma-separated ints read leniently: empty or absent is the default."""
    if value in (None, ""):
        return list(default)
    return [int(v) for v in str(value).split(",") if v != ""]


@dataclass(frozen=True)
class Restored:
    """What a URL gives a page: `values` {session key: typed value} to set, `notices` (one plain line per
    parameter ignored: unknown to the page, or a value that does not fit; plain text holding the link's own words,
    so a page shows it through core.safe_text.markdown_text)."""

    values: dict
    notices: tuple[str, ...]

    def to_json(self) -> dict:
        return {"values": dict(self.values), "notices": list(self.notices)}


def params_of(page: str) -> tuple[Param, ...]:
    """The page's params: its own, then those of the analyses drawn in a declared tab (declared_params); KeyError
    for a page not in the registry."""
    view = get(page)
    extra = declared_params(view)
    if not extra:
        return view.params
    titles = tuple(dict.fromkeys(a.tab for a in analyses_of(view.name) if a.tab))
    own = tuple(replace(p, choices=tuple(dict.fromkeys((*p.choices, *titles))))
                if p.name == "tab" and p.choices is not None else p for p in view.params)
    return own + extra


def declared_prefix(analysis: Analysis) -> str:
    """The session-key prefix of a declared tab's widgets (app_pages/widgets/analysis_tab.py)."""
    return f"{analysis.view}.{analysis.name}."


def declared_params(view: View) -> tuple[Param, ...]:
    """The URL params of the analyses of `view` declared with a tab (core.contract): their settings, and their
    tab titles added to the view's `tab` param. A view with none reads no analysis module (the registry's walk
    imports torch): only views that list `declared_tabs` do."""
    if not view.declared_tabs:
        return ()
    extra: list[Param] = []
    for analysis in (a for a in analyses_of(view.name) if a.tab):
        extra.extend(analysis_params(analysis, declared_prefix(analysis)))
    names = [p.name for p in (*view.params, *extra)]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # a link must mean one thing: give the setting another `url=` name
        raise ValueError(f"URL parameter(s) {twice} of view {view.name!r} named twice by its declared analyses")
    return tuple(extra)


def parse(page: str, query: Mapping[str, str]) -> Restored:
    """Typed session values from a page's URL query ({param: str}); the shared model/a/b are left to the router (app_pages/shell/router.py)."""
    try:
        params = {p.name: p for p in params_of(page)}
    except KeyError:
        return Restored({}, (f"Unknown page {page!r}: its settings were ignored.",))
    values: dict = {}
    notices: list[str] = []
    for name, raw in query.items():
        if name in SHARED or name in IGNORED:
            continue
        param = params.get(name)
        if param is None:
            notices.append(f"“{name}” is not a setting of this page (an old or mistyped link?): ignored.")
            continue
        try:
            values[param.key] = param.parse(str(raw))
        except ValueError as err:
            notices.append(f"“{name}={raw}” ignored: {err}.")
    return Restored(values, tuple(notices))


def encode(page: str, state: Mapping[str, Any]) -> dict[str, str]:
    """The page's URL params for the current session state: keys present, not at their default, values that parse back."""
    query: dict[str, str] = {}
    for param in params_of(page):
        if param.key not in state or state[param.key] is None or state[param.key] == param.default:
            continue  # a default needs no place in the link
        value = state[param.key]
        if isinstance(value, (tuple, set)):
            value = list(value)
        try:
            text = param.encode(value)
            param.parse(text)
        except (ValueError, TypeError):
            continue  # a value the URL cannot carry (e.g. an uploaded file's state)
        query[param.name] = text
    return query
