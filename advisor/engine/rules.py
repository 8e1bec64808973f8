"""Loading rule files: safe YAML, JSON Schema validation, expression checks.

A rule file holds one rule, a list of rules, or several YAML documents. Everything a rule
says is checked before any profile is touched, so a typo in a team's rule file is reported
with the file and rule id instead of surfacing mid-run.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.engine import rule_cache
from advisor.engine.expr import (
    MAX_STRING,
    ExprError,
    Expression,
    compile_expression,
    deferred_expression,
)
from advisor.engine.functions import regex_problem
from advisor.engine.outcome import Severity
from advisor.engine.wording import WORD_NAMES
from advisor.errors import RuleError
from advisor.lazy import lazy_module
from advisor.model import PROFILE, TABLES, TableSpec
from advisor.small_files import read_small_text

if TYPE_CHECKING:
    import yaml
else:  # parsed only when a rule file is not in the rule cache
    yaml = lazy_module("yaml")

MAX_RULE_FILE_BYTES = 1_000_000
MAX_VALUES = 100_000  # values in one YAML document, an alias counted each time it is used
MAX_NESTING = 20  # levels of nested mappings and lists
MAX_LETS = 200
BUILTIN_NAMES = frozenset({"total_us"})
"""Names every expression can read: `total_us` is the profiled time impact shares refer to."""
PROFILE_NAMES = frozenset({"device_kind", "framework", "training"})
"""The profile's device and framework (ProfileMeta) and whether it records training
(advisor.workload: true, false for inference, none where it cannot tell), readable in every
expression: advice that holds for one kind of run only (a CPU-only run's idle training
thread) says so in `when`. A param or let of the same name takes their place, as in
templates."""
LANGUAGES = ("en", "zh")
"""Languages reports can be written in; English is the default and every rule has it."""
TEMPLATE_NAMES = frozenset(
    {
        "impact_us",
        "impact_ratio",
        "total_us",
        "evidence",
        "evidence_total",
        "measured_us",
        "device_kind",
        "framework",
        "execution",
        "gpu_runtime",
        "training",
        *WORD_NAMES,
    }
)
"""Variables every message template gets besides the rule's params and lets (`device_kind`
and `framework`: a message can name the hardware the profile ran on, a CPU-only run's idle
time is no device's; `execution`: how a PyTorch trace's steps ran, EXECUTION or none;
`gpu_runtime`: a GPU trace's runtime, "CUDA" or "ROCm" (meta.extra), so that advice names the
vendor's tools; `training`: whether the profile records training, PROFILE_NAMES; the words
advisor.engine.wording gives for both in the report's language: `run_kind`, `matrix_units`,
`kernel_profiler`, `dnn_library`)."""


@dataclass(frozen=True)
class Evidence:
    """Rows that justify a finding: a filtered, sorted slice of one table."""

    table: str
    columns: tuple[str, ...]
    where: Expression | None = None
    sort: tuple[tuple[str, bool], ...] = ()  # (column, ascending)
    limit: int = 10
    filters_on: tuple[str, ...] = ()
    """The table's columns `where` reads (its other names are params and lets)."""


@dataclass(frozen=True)
class RuleText:
    """What a rule says to people in one language: reports show these, never the expressions."""

    title: str
    message: str
    suggestions: tuple[str, ...]
    impact_note: str | None = None


class _CheckedTranslations(Mapping[str, RuleText]):
    """The translated texts of a rule the rule cache has validated, each language's texts
    made (`_translation`: unfolding the spaces YAML puts between Chinese characters) when
    first read: a run in English never reads them, and making every rule's took ~3 ms of
    each run's start."""

    def __init__(self, make: Mapping[str, Callable[[], RuleText]]) -> None:
        self._make = make
        self._made: dict[str, RuleText] = {}

    def __getitem__(self, lang: str) -> RuleText:
        if lang not in self._made:
            self._made[lang] = self._make[lang]()
        return self._made[lang]

    def __iter__(self) -> Iterator[str]:
        return iter(self._make)

    def __len__(self) -> int:
        return len(self._make)


FRAMEWORKS = ("PyTorch", "MindSpore", "TensorFlow", "MegEngine")
DEVICES = ("NPU", "GPU", "CPU")
EXECUTION = ("eager", "compiled", "graphs")
"""How a PyTorch trace's steps ran: operator by operator, torch.compile's code, replayed CUDA
graphs (plugins/kineto/metadata.py execution_mode)."""


@dataclass(frozen=True)
class Applies:
    """The frameworks, devices and ways of running a suggestion is for; empty means every one.

    A GPU user must not be told to run an Ascend tool, nor a PyTorch user to use a MindSpore
    setting, so a suggestion naming one stack's API says which stack it is for; nor should a
    run that is compiled already be told to compile.
    """

    frameworks: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    execution: tuple[str, ...] = ()
    """EXECUTION modes (the profile's meta.extra["execution"]); a profile that does not say
    how it ran counts as eager, the way a step runs unless it is compiled or captured."""

    def fits(self, framework: str, device: str, execution: str | None = None) -> bool:
        """True unless the profile's framework or device is known and not listed (a CANN export
        does not say which framework ran on it, so framework advice is kept there), or its
        execution (eager where unknown: advice for compiled runs says the run is compiled)
        is not listed."""
        ran = execution if execution in EXECUTION else "eager"
        return (
            (not self.frameworks or framework not in FRAMEWORKS or framework in self.frameworks)
            and (not self.devices or device not in DEVICES or device in self.devices)
            and (not self.execution or ran in self.execution)
        )

    def specificity(self, framework: str, device: str) -> int:
        """How many of the profile's known traits this suggestion was written for."""
        return (framework in self.frameworks) + (device in self.devices)

    def label(self, framework: str, device: str) -> str:
        """The stacks a kept suggestion is for, where the profile does not say it runs on them
        (a CANN export's framework): "[MindSpore] " tells the reader the advice is conditional;
        empty when the profile's own framework and device are the ones listed, or none is."""
        unknown = (
            self.frameworks if framework not in FRAMEWORKS else (),
            self.devices if device not in DEVICES else (),
        )
        who = ", ".join("/".join(names) for names in unknown if names)
        return f"[{who}] " if who else ""


@dataclass(frozen=True)
class Rule:
    """A validated rule, its expressions compiled, ready to evaluate."""

    id: str
    name: str
    title: str
    type: str
    when: Expression
    message: str
    suggestions: tuple[str, ...]
    docs: str
    source: str
    applies: tuple[Applies, ...] = ()
    """Where each suggestion applies, in the order of `suggestions`."""
    group: str = "Model Summary"
    subtype: str = ""
    severity: Severity | None = None
    tags: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    """table.columns read where present: absent, they read as missing values (evaluate.py)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    let: Mapping[str, Expression] = field(default_factory=dict)
    impact_us: Expression | None = None
    measured_us: Expression | None = None
    impact_note: str | None = None
    time_pool: str | None = None
    """Rules of one pool measure the same kind of time (device idle, communication ...): their
    impacts overlap and are not added up."""
    evidence: Evidence | None = None
    tune_ops: str | None = None
    translations: Mapping[str, RuleText] = field(default_factory=dict)
    scope: str = PROFILE
    """Where the rule runs: the scope of the tables it reads (see model.TableSpec.scope)."""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def needs(self) -> list[str]:
        """Every table/column the rule reads: declared requirements plus expression refs
        (its optional columns too, so that providers derive them where they can)."""
        return list(self._needs)

    def required(self) -> list[str]:
        """needs() less the optional columns: what must be present for the rule to apply."""
        return list(self._required)

    @cached_property
    def _required(self) -> tuple[str, ...]:
        optional = set(self.optional)
        return tuple(n for n in self._needs if n not in optional)

    @cached_property
    def _needs(self) -> tuple[str, ...]:
        """needs(), worked out once: every profile of a run asks for it."""
        needed = list(self.requires)
        exprs = [self.when, self.impact_us, self.measured_us, *self.let.values()]
        for expr in exprs:
            if expr is None:
                continue
            needed += [f"{t}.{c}" for t, c in sorted(expr.columns)]
            needed += sorted(expr.tables)
        if self.evidence:  # evidence columns are optional: absent ones are left out
            needed.append(self.evidence.table)
            needed += [f"{self.evidence.table}.{n}" for n in self.evidence.filters_on]
        return tuple(dict.fromkeys(needed))

    @cached_property
    def lets_for_when(self) -> tuple[str, ...]:
        """The lets `when` reads, itself or through other lets, in their order (a let reads
        only the lets before it): the others are computed once the rule fires, which on most
        profiles most rules do not."""
        wanted = set(self.when.names)
        for name in reversed(list(self.let)):
            if name in wanted:
                wanted |= self.let[name].names
        return tuple(n for n in self.let if n in wanted)

    def text(self, lang: str = "en") -> RuleText:
        """The rule's texts in `lang`; English when the rule has no such translation."""
        return self.translations.get(lang) or RuleText(
            self.title, self.message, self.suggestions, self.impact_note
        )

    def scopes(self) -> tuple[Applies, ...]:
        """Where each suggestion applies (everywhere for a rule built without scopes)."""
        return self.applies or (Applies(),) * len(self.suggestions)

    def suggestions_for(
        self, lang: str, framework: str, device: str, execution: str | None = None
    ) -> list[tuple[str, str]]:
        """The suggestion templates that fit a profile, the most specific first (stable), each
        with the label of the stacks it is for where the profile does not say (`Applies.label`)."""
        texts = self.text(lang).suggestions
        fitting = [
            (i, a) for i, a in enumerate(self.scopes()) if a.fits(framework, device, execution)
        ]
        fitting.sort(key=lambda ia: -ia[1].specificity(framework, device))
        return [(texts[i], a.label(framework, device)) for i, a in fitting]

    def matches(self, selector: str) -> bool:
        """True when --select/--ignore names this rule by id, name or tag, in any letter case
        (`op-005` is OP-005): a selector is typed by hand and a case slip must not silently
        select nothing."""
        key = selector.casefold()
        return key in (self.id.casefold(), self.name.casefold()) or any(
            key == tag.casefold() for tag in self.tags
        )


@cache
def rule_schema() -> dict[str, Any]:
    """The JSON Schema every rule is checked against (read when first needed: rules from the
    rule cache were checked already)."""
    from importlib.resources import files

    text = files("advisor").joinpath("schemas/rule.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _loader() -> Any:
    """SafeLoader that refuses duplicate keys instead of silently keeping the last one.

    libyaml's parser (bundled with PyYAML's wheels) when present: it parses the rule files of
    every run several times faster; the constructors, hence what YAML may build, are the same.
    Built on first use, since importing PyYAML costs more than reading the cached rules.
    """

    class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    UniqueKeyLoader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
    )
    return UniqueKeyLoader


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, (list, dict)):  # `? [a, b]`: a TypeError in `key in seen`
            raise yaml.constructor.ConstructorError(
                None, None, f"a {type(key).__name__} cannot be a key", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=deep)
    return mapping


def read_rule_documents(path: Path) -> list[dict[str, Any]]:
    """Parse a rule file into raw rule mappings (no validation yet)."""
    return parse_rule_documents(path, read_rule_text(path))


def read_rule_text(path: Path) -> str:
    """A rule file's text; a RuleError when it is too large, not UTF-8 or unreadable."""
    try:
        return read_small_text(path, MAX_RULE_FILE_BYTES)
    except ValueError as exc:  # too large (UnicodeDecodeError is a ValueError too)
        problem = str(exc) if not isinstance(exc, UnicodeDecodeError) else f"not UTF-8: {exc}"
        raise RuleError(path, None, problem) from None
    except OSError as exc:
        raise RuleError(path, None, f"cannot read: {exc.strerror or exc}") from None


def parse_rule_documents(path: Path, text: str) -> list[dict[str, Any]]:
    """The raw rule mappings of a rule file's text (`path` names it in errors)."""
    try:
        _check_nesting(path, text)
        docs = [d for d in yaml.load_all(text, Loader=_loader()) if d is not None]
    except yaml.YAMLError as exc:
        raise RuleError(path, None, f"invalid YAML: {' '.join(str(exc).split())}") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        raise RuleError(path, None, f"invalid YAML: {type(exc).__name__}: {exc}") from None
    rules: list[dict[str, Any]] = []
    for doc in docs:
        structure = _structure_problem(doc)
        if structure:
            raise RuleError(path, None, structure)
        items = doc if isinstance(doc, list) else [doc]
        for item in items:
            if not isinstance(item, dict):
                raise RuleError(path, None, "a rule must be a mapping of keys to values")
            rules.append(item)
    return rules


def _check_nesting(path: Path, text: str) -> None:
    """Refuse deep nesting before building it: building takes time quadratic in the depth."""
    depth = 0
    for event in yaml.parse(text, Loader=_loader()):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING:
                raise RuleError(path, None, f"nested more than {MAX_NESTING} levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _structure_problem(doc: Any) -> str | None:
    """Why a document is too big or deep to validate, or None.

    YAML aliases let a small file stand for a huge or endless structure ("billion laughs",
    `&a [*a]`); the schema check would walk it all, and quote it in its messages.
    """
    stack: list[tuple[Any, int]] = [(doc, 1)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return f"more than {MAX_VALUES} values (YAML aliases expanding?)"
        if depth > MAX_NESTING:
            return f"nested more than {MAX_NESTING} levels deep (YAML aliases referring back?)"
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in (*value.keys(), *value.values())]
        elif isinstance(value, list):
            stack += [(v, depth + 1) for v in value]
    return None


def _check_patterns(expr: Expression) -> None:
    """Refuse a risky or invalid literal regex of matches() now rather than at each run
    (parsed again only where the text may call it: ASCII text without the name cannot)."""
    if expr.source.isascii() and "matches" not in expr.source:
        return
    for node in ast.walk(ast.parse(expr.source, mode="eval")):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "matches"
        ):
            continue
        args = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "pattern")]
        for arg in args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                problem = regex_problem(arg.value)
                if problem:
                    raise ExprError(problem)


@cache
def _validator() -> Any:
    """The rule schema's validator, built on first use: a run whose rule files all come from
    the rule cache never imports jsonschema."""
    import jsonschema

    return jsonschema.Draft202012Validator(inlined_refs(rule_schema()))


def inlined_refs(schema: Any, defs: Mapping[str, Any] | None = None) -> Any:
    """`schema` with each `{"$ref": "#/$defs/NAME", ...}` replaced by that definition and the
    keys beside the reference (annotations): the same verdicts and errors, without resolving
    a reference for every let of every rule (3% of a cold rule check). The rule schema's
    definitions do not refer to themselves."""
    if defs is None:
        defs = schema.get("$defs", {})
    if isinstance(schema, list):
        return [inlined_refs(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: inlined_refs(v, defs) for k, v in schema.items() if k not in ("$ref", "$defs")}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {**inlined_refs(defs[ref.removeprefix("#/$defs/")], defs), **out}
    if ref is not None:
        out["$ref"] = ref
    return out


def _schema_problem(raw: dict[str, Any]) -> str | None:
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator().iter_errors(raw))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    message = str(error.message)  # quotes the value: keep one short line
    if len(message) > 200:
        message = f"{message[:100]}…{message[-80:]}"
    if error.validator == "additionalProperties":
        return message + (f" (in {where})" if where else "")
    return f"{where or 'rule'}: {message}"


def _scope(rule: Rule, tables: Mapping[str, TableSpec]) -> str:
    """Where a rule runs: on the cluster or compare profile when it reads one of their tables
    (they also hold per-profile tables such as `steps`), else on each profile. Reading both
    cluster and compare tables is a RuleError: no profile holds both."""
    scopes = {tables[n.split(".")[0]].scope for n in rule.needs()} - {PROFILE}
    if len(scopes) > 1:
        raise RuleError(
            rule.source,
            rule.id,
            "reads tables of different scopes ("
            f"{', '.join(sorted(scopes))}): a rule runs on one kind of profile",
        )
    return scopes.pop() if scopes else PROFILE


def _template_problem(text: str, names: Collection[str] | None = None) -> str | None:
    """check_template, importing Jinja only when a rule file is checked (a cached one is
    not, and commands that render nothing never load it)."""
    from advisor.engine.templates import check_template

    return check_template(text, names)


def build_rule(
    raw: dict[str, Any],
    source: str,
    functions: Collection[str],
    tables: Mapping[str, TableSpec] = TABLES,
    checked: bool = False,
    refs: Mapping[str, Any] | None = None,
) -> Rule:
    """Validate one raw rule mapping and compile its expressions against `tables` (the
    built-in ones, or with the tables plugins register).

    `checked`: `raw` comes from the rule cache, so it passed the checks that depend on its
    text alone (schema, templates, translated variables, regex patterns) with these functions
    and tables; they are skipped, everything else is built as usual. `refs`: what the cache
    recorded each expression reads (expression_refs), so expressions are compiled on first
    evaluation instead of now."""
    rule_id = raw.get("id") if isinstance(raw.get("id"), str) else None
    problem = None if checked else _schema_problem(raw)
    if problem:
        raise RuleError(source, rule_id, problem)
    specs, columns = tables, {name: spec.column_names for name, spec in tables.items()}
    params = dict(raw.get("params", {}))
    long_text = [k for k, v in params.items() if isinstance(v, str) and len(v) > MAX_STRING]
    if long_text:
        raise RuleError(
            source, rule_id, f"params.{long_text[0]}: text longer than {MAX_STRING} characters"
        )
    if len(raw.get("let", {})) > MAX_LETS:
        raise RuleError(source, rule_id, f"let: more than {MAX_LETS} lets")
    reserved = sorted(BUILTIN_NAMES & (set(params) | set(raw.get("let", {}))))
    if reserved:
        raise RuleError(source, rule_id, f"{reserved[0]!r} is a built-in name; rename it")
    known = set(params) | BUILTIN_NAMES | PROFILE_NAMES

    def expr(text: Any, what: str, names: Collection[str]) -> Expression:
        if checked and refs is not None and what in refs:
            used_names, used_columns, used_tables = refs[what]
            return deferred_expression(
                str(text).strip(),
                frozenset(used_names),
                frozenset((table, column) for table, column in used_columns),
                frozenset(used_tables),
                lambda: compile_expression(
                    str(text), functions=functions, tables=columns, names=names, checked=True
                ),
            )
        try:
            compiled = compile_expression(
                str(text), functions=functions, tables=columns, names=names, checked=checked
            )
            if not checked:
                _check_patterns(compiled)
            return compiled
        except ExprError as exc:
            raise RuleError(source, rule_id, f"{what}: {exc}") from None

    for req in raw.get("requires", []):
        table, _, column = req.partition(".")
        if table not in columns or (column and column not in columns[table]):
            raise RuleError(source, rule_id, f"requires: unknown table or column {req!r}")
    for opt in raw.get("optional", []):
        table, _, column = opt.partition(".")
        if table not in columns or column not in columns[table]:
            raise RuleError(source, rule_id, f"optional: unknown table or column {opt!r}")
        if opt in raw.get("requires", []):
            raise RuleError(source, rule_id, f"optional: {opt!r} is also in requires")
    let: dict[str, Expression] = {}
    for name, text in raw.get("let", {}).items():
        if name in params:
            raise RuleError(source, rule_id, f"let: {name!r} is already a param")
        let[name] = expr(text, f"let.{name}", known)
        known.add(name)
    when = expr(raw["when"], "when", known)
    impact = expr(raw["impact_us"], "impact_us", known) if "impact_us" in raw else None
    evidence = None
    if "evidence" in raw:
        ev = raw["evidence"]
        table = ev["from"]
        if table not in columns:
            raise RuleError(source, rule_id, f"evidence.from: unknown table {table!r}")
        cols = set(columns[table])
        sort = []
        for key in ev.get("sort", []):
            col = key.lstrip("+-")
            sort.append((col, not key.startswith("-")))
        for col in [*ev["columns"], *(c for c, _ in sort)]:
            if col not in cols:
                raise RuleError(source, rule_id, f"evidence: {table} has no column {col!r}")
        where = expr(ev["where"], "evidence.where", known | cols) if "where" in ev else None
        shadowed = sorted(where.names & known & cols) if where else []
        if shadowed:
            raise RuleError(
                source,
                rule_id,
                f"evidence.where: {shadowed[0]!r} is both a "
                f"param/let and a column of {table}; rename it",
            )
        evidence = Evidence(
            table,
            tuple(ev["columns"]),
            where,
            tuple(sort),
            ev.get("limit", 10),
            tuple(sorted(where.names & cols)) if where else (),
        )
    tune_ops = raw.get("tune_ops")
    if tune_ops and (evidence is None or tune_ops not in evidence.columns):
        raise RuleError(source, rule_id, f"tune_ops: {tune_ops!r} is not an evidence column")
    suggestions = [s if isinstance(s, str) else s["text"] for s in raw["suggestions"]]
    applies = tuple(
        Applies()
        if isinstance(s, str)
        else Applies(
            tuple(s.get("frameworks", ())),
            tuple(s.get("devices", ())),
            tuple(s.get("execution", ())),
        )
        for s in raw["suggestions"]
    )
    texts = [
        ("message", raw["message"]),
        *((f"suggestions[{i}]", s) for i, s in enumerate(suggestions)),
    ]
    if "impact_note" in raw:
        texts.append(("impact_note", raw["impact_note"]))
    for key, text in [] if checked else texts:
        problem = _template_problem(text)
        if problem:
            raise RuleError(source, rule_id, f"{key}: {problem}")
    if raw.get("severity") == "high" and impact is None and "impact_note" not in raw:
        raise RuleError(
            source,
            rule_id,
            "a high-severity rule without impact_us needs an "
            "impact_note saying why no time is measured",
        )
    measured = expr(raw["measured_us"], "measured_us", known) if "measured_us" in raw else None
    translations: Mapping[str, RuleText] = {}
    if "zh" in raw:
        names = set(params) | set(let)
        if checked:
            translations = _CheckedTranslations(
                {"zh": lambda: _translation(raw, "zh", names, source, rule_id, checked=True)}
            )
        else:  # checked now: a problem of the translation is the rule file's error now
            translations = {"zh": _translation(raw, "zh", names, source, rule_id)}
    rule = Rule(
        id=raw["id"],
        name=raw["name"],
        title=raw["title"],
        type=raw["type"],
        when=when,
        message=raw["message"],
        suggestions=tuple(suggestions),
        docs=raw["docs"],
        source=source,
        applies=applies,
        group=raw.get("group", "Model Summary"),
        subtype=raw.get("subtype", ""),
        severity=Severity(raw["severity"]) if "severity" in raw else None,
        tags=tuple(raw.get("tags", ())),
        requires=tuple(raw.get("requires", ())),
        optional=tuple(raw.get("optional", ())),
        params=params,
        let=let,
        impact_us=impact,
        measured_us=measured,
        impact_note=raw.get("impact_note"),
        time_pool=raw.get("time_pool"),
        evidence=evidence,
        tune_ops=tune_ops,
        translations=translations,
        raw=raw,
    )
    # set before the rule is shared (frozen otherwise): replace() would build it a second
    # time and drop the needs() that _scope worked out, which every evaluation reads again
    object.__setattr__(rule, "scope", _scope(rule, specs))
    return rule


def _translation(
    raw: dict[str, Any],
    lang: str,
    names: set[str],
    source: str,
    rule_id: str | None,
    checked: bool = False,
) -> RuleText:
    """Check a translated block like the English texts, and that it promises the same advice
    with the same data: as many suggestions, and no variable the English texts cannot use
    (its templates are not parsed again when `checked`, see build_rule)."""
    block = raw[lang]
    if len(block["suggestions"]) != len(raw["suggestions"]):
        raise RuleError(
            source,
            rule_id,
            f"{lang}.suggestions: {len(block['suggestions'])} "
            f"given, the English texts have "
            f"{len(raw['suggestions'])}",
        )
    if ("impact_note" in block) != ("impact_note" in raw):
        raise RuleError(
            source,
            rule_id,
            f"{lang}.impact_note: give it exactly when the English impact_note is given",
        )
    known = names | TEMPLATE_NAMES
    texts = [
        ("message", block["message"]),
        *((f"suggestions[{i}]", s) for i, s in enumerate(block["suggestions"])),
    ]
    if "impact_note" in block:
        texts.append(("impact_note", block["impact_note"]))
    for key, text in [] if checked else texts:
        problem = _template_problem(text, known)
        if problem:
            raise RuleError(source, rule_id, f"{lang}.{key}: {problem}")
    note = block.get("impact_note")
    return RuleText(
        unfold_cjk(block["title"]),
        unfold_cjk(block["message"]),
        tuple(unfold_cjk(s) for s in block["suggestions"]),
        None if note is None else unfold_cjk(note),
    )


def unfold_cjk(text: str) -> str:
    """`text` without the spaces between two Chinese characters or punctuation marks, which
    Chinese never writes: YAML's folded style (`>-`) joins a text's lines with one, so a
    message broken after "，" read "， 每个迭代". Nor beside full-width punctuation ("，
    {{ steps }}" read "， 1 个迭代"). Other spaces beside Latin letters, digits and template
    tags stay ("共 {{ n }} 次"). (Not a regular expression: compiling one over these ranges
    costs 2.5 ms, on every `advisor rules list`.)"""
    pieces = text.split(" ")
    joined = pieces[0]
    for piece in pieces[1:]:
        if (
            joined
            and piece
            and (
                (_is_cjk(joined[-1]) and _is_cjk(piece[0]))
                or _is_full_width_mark(joined[-1])
                or _is_full_width_mark(piece[0])
            )
        ):
            joined += piece
        else:
            joined += " " + piece
    return joined


def _is_full_width_mark(char: str) -> bool:
    """CJK punctuation or full-width forms (，。：（）), after or before which Chinese text
    writes no space."""
    return "\u3000" <= char <= "\u303f" or "\uff00" <= char <= "\uffef"


def _is_cjk(char: str) -> bool:
    """CJK punctuation, ideographs or full-width forms."""
    return "\u4e00" <= char <= "\u9fff" or _is_full_width_mark(char)


def rule_files(path: Path) -> list[Path]:
    """The rule files a path stands for: the file itself, or *.yaml/*.yml under a folder."""
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*")
            if p.suffix in (".yaml", ".yml") and not p.name.endswith((".case.yaml", ".case.yml"))
        )
    return [path]


def load_rule_file(
    path: Path,
    functions: Collection[str],
    tables: Mapping[str, TableSpec] = TABLES,
    contract: Sequence[str] | None = None,
) -> tuple[list[Rule], list[RuleError]]:
    """Build every rule of a file; one bad rule does not hide the good ones beside it.

    A built-in file as advisor shipped it (checked and parsed when advisor was built) and a
    file whose rules all passed before, with the same text, functions and tables (the rule
    cache, advisor.engine.rule_cache), are not checked again; the built-in files' records
    ship with advisor, so they never take room in the user's cache. `contract`:
    rule_contract(functions, tables), when the caller loads several files against them."""
    try:
        text = read_rule_text(path)
    except RuleError as exc:
        return [], [exc]
    if contract is None:
        contract = rule_contract(functions, tables)
    key = ""  # the user's cache's key, made only when it is looked in
    cached = _shipped_check(text, contract)
    if cached is None:
        key = rule_cache.entry_key(text, contract)
        cached = rule_cache.load_entry(key)
    if cached is not None:
        raws, refs = cached
        try:
            rules = [
                build_rule(
                    raw, str(path), functions, tables, checked=True, refs=refs.get(raw["id"])
                )
                for raw in raws
            ]
        except (RuleError, LookupError, TypeError, ValueError, AttributeError):
            pass  # an entry of the wrong shape: check the file as if it were not cached
        else:
            return rules, []
    rules = []
    errors: list[RuleError] = []
    try:
        raws = parse_rule_documents(path, text)
    except RuleError as exc:
        return [], [exc]
    for raw in raws:
        try:
            rules.append(build_rule(raw, str(path), functions, tables))
        except RuleError as exc:
            errors.append(exc)
    if not errors:
        key = key or rule_cache.entry_key(text, contract)
        rule_cache.store(key, raws, {rule.id: expression_refs(rule) for rule in rules})
    return rules, errors


def _shipped_check(
    text: str, contract: Sequence[str]
) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The rule mappings of a built-in rule file as advisor checked and parsed them when it
    was built (rule_cache.shipped_record) and what their expressions read; None when `text`
    is no such file, or the record does not name exactly the file's rules."""
    record = rule_cache.shipped_record(text, contract)
    if record is None:
        return None
    refs, raws = record
    if not all(isinstance(raw, dict) for raw in raws):
        return None
    if sorted(str(raw.get("id")) for raw in raws) != sorted(refs):
        return None
    return raws, refs


def checked_rules(
    path: Path, functions: Collection[str], tables: Mapping[str, TableSpec]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A file's rule mappings and what each of its rules reads (expression_refs, by rule id),
    every rule checked in full without any cache; RuleError for the first problem. What
    builtin_checks.json holds of each built-in file (advisor.docgen writes it)."""
    raws = parse_rule_documents(path, read_rule_text(path))
    rules = [build_rule(raw, str(path), functions, tables) for raw in raws]
    return raws, {rule.id: expression_refs(rule) for rule in rules}


def expression_refs(rule: Rule) -> dict[str, list[Any]]:
    """What each expression of a built rule reads (names, table columns, tables), by its
    place in the rule (`when`, `let.NAME` ...): the rule cache keeps it so a cached rule's
    expressions can be compiled when first evaluated (build_rule's `refs`)."""
    expressions = {f"let.{name}": e for name, e in rule.let.items()}
    expressions["when"] = rule.when
    if rule.impact_us is not None:
        expressions["impact_us"] = rule.impact_us
    if rule.measured_us is not None:
        expressions["measured_us"] = rule.measured_us
    if rule.evidence is not None and rule.evidence.where is not None:
        expressions["evidence.where"] = rule.evidence.where
    return {
        what: [sorted(e.names), sorted(map(list, e.columns)), sorted(e.tables)]
        for what, e in expressions.items()
    }


def rule_contract(functions: Collection[str], tables: Mapping[str, TableSpec]) -> list[str]:
    """What a rule file is checked against besides its text: the expression functions' names
    and every table's scope and columns (plugins add both)."""
    return [
        ",".join(sorted(functions)),
        *(
            f"{name}:{spec.scope}:{','.join(spec.column_names)}"
            for name, spec in sorted(tables.items())
        ),
    ]


@dataclass
class RuleSet:
    """Rules in effect after overrides, with a note of which rule replaced which."""

    rules: dict[str, Rule] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    """Rule id -> who supplied it ("built-in", "plugin NAME", "user"), for `rules list`."""

    def add(self, rule: Rule, origin: str = "user") -> None:
        old = self.rules.get(rule.id)
        if old is not None and old.source != rule.source:
            self.overrides.append(
                f"{rule.id} from {rule.source} replaces the "
                f"{self.origins[old.id]} one in {old.source}"
            )
        self.rules[rule.id] = rule
        self.origins[rule.id] = origin


def load_rules(
    paths: Iterable[Path],
    functions: Collection[str],
    origins: Mapping[Path, str] | None = None,
    tables: Mapping[str, TableSpec] = TABLES,
) -> tuple[RuleSet, list[RuleError]]:
    """Load rules in order (later ids replace earlier); bad files are returned, not raised.

    `origins` labels the rules under a path (default "user"), e.g. {rules_dir: "built-in"}.
    """
    ruleset = RuleSet()
    errors: list[RuleError] = []
    contract = rule_contract(functions, tables)
    for root in paths:
        if not root.exists():
            errors.append(RuleError(root, None, "no such file or folder"))
            continue
        for path in rule_files(root):
            rules, problems = load_rule_file(path, functions, tables, contract)
            for rule in rules:
                ruleset.add(rule, (origins or {}).get(root, "user"))
            errors += problems
    return ruleset, errors
