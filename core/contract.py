"""One declaration per analysis: its settings written once, every front end made from it.

An analysis (after LIT's `config_spec` + `run` and captum's one verb) is declared once, as `ANALYSIS = Analysis(...)`
(or several in `ANALYSES = (...)`) in the module that computes it:

- `settings`: a frozen dataclass whose fields are `setting(default, help, low=, high=, choices=, ...)`: the field's
  type, default, bounds, choices, other accepted spellings (`aliases`) and help, in one place;
- `run`: `run(subject, inputs, settings, progress=None, should_stop=None) -> Result` (a frozen dataclass with
  `to_json()`), given as the function or as "module:function" so a declaration stays light at import;
- `charts`: `charts(result) -> [(chart, caption), ...]`, likewise.

Made from it (tests/unit/test_analysis_contract.py checks every analysis of the registry): the CLI subcommand's
options (`core.commands.add_settings_arguments`: `--name-with-dashes`, the same default, bounds and choices, the
help), the `core.lens` function's keyword arguments and its docstring (`core.lens.twin`), the URL parameters
(`core.views.analysis_params`), the widgets' defaults and bounds (`app_pages/widgets/settings_form.py`), the lesson
step's validation (through the URL parameters) and `python -m core views --json`'s "analyses". `Analysis.make`
is the one check every front end goes through: unknown names, a value of the wrong type, outside its bounds or not
among its choices raise ValueError naming the setting; an alias is read as the value it stands for, so a CLI
spelling and the notebook accept the same values.

The registry (`core.views.all_analyses()`) finds declarations as the view registry finds views: no hand-kept list.
This module is pure (no torch, no streamlit): base level, imported by every layer above.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

TYPES = ("int", "float", "str", "bool", "ints", "strs")
# What an analysis reads besides the model and its settings (`Analysis.inputs`), and how each front end asks for
# it: the CLI's options, the notebook's positional arguments, the page's own widgets.
INPUTS = {
    "text": "a sentence (--text; the page's sentence A) and an optional second one (--text-b; sentence B)",
    "corpus": "a corpus (--corpus, core.data.corpus's grammar; the page's corpus picker)",
}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Setting:
    """What a settings field carries besides its name and default (see `setting`)."""

    help: str
    type: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple | None = None
    aliases: Mapping[str, Any] = field(default_factory=dict)
    url: str | None = ""
    cli: str | None = ""
    shown: int = 0
    optional: bool = False
    label: str = ""

    @property
    def widget_label(self) -> str:
        """The page's label: the declared one, else the help's first clause."""
        text = self.label or self.help.split(";")[0].split(" (")[0]
        return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class Sentences:
    """The "text" input: sentence A and an optional sentence B (a pair)."""

    text: str
    text_b: str | None = None


def setting(default: Any, help: str, *, type: str = "", low: float | None = None, high: float | None = None,
            choices: tuple | None = None, aliases: Mapping[str, Any] | None = None, url: str | None = "",
            cli: str | None = "", shown: int = 0, label: str = "") -> Any:
    """A field of an analysis's settings dataclass. `type` one of TYPES (left out: read from the default; give it
    when the default is None, which then means "the analysis decides", e.g. a layer that depends on the model);
    `low` / `high` inclusive bounds of a number (of each item of a list); `choices` the allowed values;
    `aliases` other spellings every front end accepts ({"A→B": "a-b"}); `url` the URL parameter's name ("" the
    field's name, None: not in a link); `cli` the option's name without dashes ("" the field's name with dashes,
    None: no option); `shown` what the URL and the charts add to an int held as an array index (1: a transformer
    layer, core.numbering); `label` the page's widget label (default: the help's first clause). A list default
    is given as a tuple (the dataclass stays frozen and hashable)."""
    kind = type or _type_of(default)
    if kind not in TYPES:
        raise TypeError(f"setting type must be one of {', '.join(TYPES)}, not {kind!r}")
    meta = Setting(help=help, type=kind, low=low, high=high, choices=tuple(choices) if choices is not None else None,
                   aliases=dict(aliases or {}), url=url, cli=cli, shown=shown, optional=default is None,
                   label=label)
    return field(default=default, metadata={"setting": meta})


def _type_of(default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, str):
        return "str"
    if isinstance(default, tuple) and default:
        return "ints" if all(isinstance(v, int) and not isinstance(v, bool) for v in default) else "strs"
    raise TypeError(f"give the setting's type: its default {default!r} does not say it")


@dataclass(frozen=True)
class SettingField:
    """One setting as the front ends see it: `name` (the dataclass field), `default`, and the `Setting`."""

    name: str
    default: Any
    meta: Setting

    @property
    def type(self) -> str:
        return self.meta.type

    @property
    def option(self) -> str | None:
        """The CLI option (`--name-with-dashes`), None when the command line has none."""
        if self.meta.cli is None:
            return None
        return "--" + (self.meta.cli or self.name.replace("_", "-"))

    @property
    def url_name(self) -> str | None:
        return None if self.meta.url is None else (self.meta.url or self.name)

    def check(self, value: Any) -> Any:
        """The value typed, an alias read as the value it stands for; ValueError naming the setting when it does
        not fit. None stays None for a setting whose default is None (the analysis decides)."""
        if value is None and self.meta.optional:
            return None
        if self.type in ("ints", "strs"):
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip() != ""]
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"{self.name} must be a list, got {value!r}")
            return tuple(self._one(v, self.type[:-1]) for v in value)
        return self._one(value, self.type)

    def _one(self, value: Any, kind: str) -> Any:
        if isinstance(value, str) and value in self.meta.aliases:
            value = self.meta.aliases[value]
        try:
            value = _coerce(value, kind)
        except (TypeError, ValueError):
            raise ValueError(f"{self.name} must be {_KIND_WORDS[kind]}, got {value!r}") from None
        if self.meta.choices is not None and value not in self.meta.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(map(str, self.meta.choices))}, got {value!r}")
        low, high = self.meta.low, self.meta.high
        if low is not None and value < low or high is not None and value > high:
            raise ValueError(f"{self.name} must be within {bound_text(low)}…{bound_text(high)}, got {value!r}")
        return value

    def describe(self) -> dict:
        """The JSON of `python -m core views --json`'s settings: name, type, default, low, high, choices, help."""
        default = list(self.default) if isinstance(self.default, tuple) else self.default
        return {"name": self.name, "type": self.type, "default": default, "low": self.meta.low,
                "high": self.meta.high, "choices": list(self.meta.choices) if self.meta.choices is not None else None,
                "help": self.meta.help}


_KIND_WORDS = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false"}


def bound_text(value) -> str:
    """A bound as a person reads it: 1000000, not 1e+06; "" for none."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _coerce(value: Any, kind: str) -> Any:
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ValueError(value)
    if kind == "int":
        if isinstance(value, bool):
            raise TypeError(value)
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(value)
            return int(value)
        return int(value)  # ints, numpy integers, text of digits
    if kind == "float":
        if isinstance(value, bool):
            raise TypeError(value)
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(value)
        return number
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # a text setting given a number (lens.explain(target=1): a class index) reads as its text
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def settings_fields(settings_cls: type) -> tuple[SettingField, ...]:
    """The declared settings of a settings dataclass, in field order (fields without `setting` metadata are the
    analysis's own bookkeeping, not settings a front end offers)."""
    out = []
    for f in dataclasses.fields(settings_cls):
        meta = f.metadata.get("setting")
        if meta is not None:
            out.append(SettingField(f.name, f.default, meta))
    return tuple(out)


def resolve(target: str | Callable | None) -> Callable | None:
    """A callable given as itself or as "package.module:function" (imported now: the declaration stays light)."""
    if target is None or callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Analysis:
    """One analysis, declared once (module docstring). `name` the registry's name; `view` the core.views view
    whose page shows it (its tab: `title`, in `order`); `command` its `python -m core` subcommand; `lens` its
    core.lens function's name; `settings` the settings dataclass; `run` and `charts` (callables or
    "module:function"); `summary` one plain sentence (the CLI's help, the notebook's docstring).

    `inputs` (keys of INPUTS) and `tab`: an analysis declaring them needs nothing else. Its CLI subcommand
    (core/commands/declared.py), its core.lens function and its tab on the view's page (`tab`, its title;
    app_pages/widgets/analysis_tab.py) are made from the declaration when no module writes them by hand; `run`
    then takes (model, inputs, settings, progress=None, should_stop=None), inputs being a `Sentences` or a
    core.data.corpus.Corpus, and returns a frozen result with `to_json()`."""

    name: str
    view: str
    command: str
    lens: str
    settings: type
    run: str | Callable | None = None
    charts: str | Callable | None = None
    title: str = ""
    summary: str = ""
    order: int = 0
    inputs: tuple[str, ...] = ()
    tab: str = ""

    def __post_init__(self):
        unknown = [i for i in self.inputs if i not in INPUTS]
        if unknown or len(self.inputs) > 1:
            raise ValueError(f"{self.name}: inputs are one of {', '.join(INPUTS)} (got {list(self.inputs)})")

    @property
    def fields(self) -> tuple[SettingField, ...]:
        return settings_fields(self.settings)

    def field(self, name: str) -> SettingField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no setting {name!r}")

    def make(self, values: Mapping[str, Any] | None = None, /, **more: Any):
        """The settings dataclass from any front end's values (defaults for the rest); every value checked and
        typed by its declaration. ValueError names the setting; an unknown name lists the known ones."""
        given = {**(values or {}), **more}
        known = {f.name: f for f in self.fields}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(f"{self.name} has no setting {', '.join(map(repr, unknown))}; "
                             f"its settings: {', '.join(known)}")
        return self.settings(**{name: known[name].check(value) for name, value in given.items()})

    def run_function(self) -> Callable:
        return resolve(self.run)

    def charts_function(self) -> Callable | None:
        return resolve(self.charts)

    def describe(self) -> dict:
        """This analysis in `python -m core views --json`: name, view, command, lens, settings."""
        return {"name": self.name, "view": self.view, "command": self.command, "lens": self.lens,
                "title": self.title, "inputs": list(self.inputs), "tab": self.tab,
                "settings": [f.describe() for f in self.fields]}

    def docstring(self) -> str:
        """The settings paragraph of the lens function's docstring: one line each, with default and bounds."""
        lines = ["Settings (declared once in " + self.settings.__module__ + "." + self.settings.__qualname__ + "):"]
        for f in self.fields:
            extra = []
            if f.meta.choices is not None:
                extra.append("one of " + ", ".join(map(str, f.meta.choices)))
            if f.meta.low is not None or f.meta.high is not None:
                extra.append(f"{bound_text(f.meta.low)}…{bound_text(f.meta.high)}")
            if f.meta.shown:  # the notebook takes array indices (as outputs.attentions[i]); charts add `shown`
                extra.append(f"an array index: charts, links and the CLI show it as index + {f.meta.shown}")
            default = list(f.default) if isinstance(f.default, tuple) else f.default
            lines.append(f"    {f.name} ({f.type}, default {default!r}{'; ' + '; '.join(extra) if extra else ''}): "
                         f"{f.meta.help}")
        return "\n".join(lines)


def analyses_in(module) -> tuple[Analysis, ...]:
    """The analyses a module declares: its `ANALYSIS` and / or `ANALYSES`."""
    found = []
    if isinstance(getattr(module, "ANALYSIS", None), Analysis):
        found.append(module.ANALYSIS)
    found.extend(a for a in getattr(module, "ANALYSES", ()) if isinstance(a, Analysis))
    return tuple(found)
