"""The Python API (`advisor.analyze`), also what the CLI runs: locate, read, derive, evaluate.

Notebook users get the normalized tables as DataFrames, the derived metrics and the findings
from the same objects the CLI renders, so both always agree.

Each profile goes through one stage, read → derive → evaluate → metrics (and, when its tables
are not kept, its report and a summary for the cluster), in this process or, with several
jobs or a Dask scheduler, in the worker that read it.
"""

from __future__ import annotations

import os
import pickle
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from advisor.cluster import MixedRuns, RankSummary, cluster_profile, mixed_runs, rank_summary
from advisor.collector import skip_cycles_for
from advisor.config import Config
from advisor.engine.evaluate import Evaluation, Finding
from advisor.engine.rules import Rule
from advisor.engine.sharing import EvaluationSharing
from advisor.errors import AdvisorError, RuleError
from advisor.formats import read_ahead
from advisor.hookspecs import ReportSection
from advisor.lazy import lazy_module
from advisor.locate import Claim
from advisor.metrics import ProfileMetrics, empty_metrics, profile_metrics
from advisor.model import CLUSTER, PROFILE, Profile, RunInfo
from advisor.plugin_manager import PluginHost, PluginInfo
from advisor.reading import (
    Reading,
    Workers,
    find_claims,
    input_bytes,
    local_workers,
    map_claims,
    numeric_order,
    read_claim,
    trace_folds,
    workers_for,
)
from advisor.render.json_report import build_report
from advisor.session import Session, SessionRecipe, reopen
from advisor.spool import Spool, Spooled, SpooledList
from advisor.tuning_loop import files_read, neighbour_results, tuning_loop

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


@dataclass
class ProfileAnalysis:
    """One profile (device or rank) with its evaluation, metrics and prof_rule report."""

    profile: Profile
    evaluation: Evaluation
    rules: list[Rule]
    """The rules evaluated on this profile (the report lists each with its outcome)."""
    metrics: ProfileMetrics
    """The report's figures as DataFrames (steps, core_types, compute_classes, ranks) and
    host counts."""
    run: RunInfo = field(default_factory=RunInfo)
    tuning: dict[str, Any] | None = None
    """What AOE did with the operators advised here, when AOE results were found."""
    packed_report: bytes | Spooled[bytes] | None = field(default=None, repr=False)
    """The report as built before the tables were dropped (`without_tables`), but for the
    two parts analyze may add later (warnings and the tuning loop), pickled and compressed:
    14 KB where its objects take 168 KB (a rank of a 10 MB trace); in a run of many ranks,
    on disk (`park`). Unpacked on each use of `report`."""
    sections: list[ReportSection] | None = field(default=None, repr=False)
    """The plugins' HTML sections, computed before the tables were dropped; None: computed
    by the HTML output from this analysis."""
    window_rows: dict[str, pd.DataFrame] | None = field(default=None, repr=False)
    """The rows of the findings' windows that their trace snippets need, kept when the tables
    were dropped (advisor/traces.py); None: the snippets read the profile's tables."""

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return self.profile.tables

    @property
    def findings(self) -> Sequence[Finding]:
        return self.evaluation.findings

    @property
    def report(self) -> dict[str, Any]:
        """The prof_rule-style dict written as JSON, from the typed results above (which are
        complete by the time `analyze` returns): built once, on first use, or unpacked anew
        on each use when the tables were dropped."""
        packed = self.packed_report
        if packed is None:
            return self._built_report
        if isinstance(packed, Spooled):
            packed = packed.load()
        report = pickle.loads(zlib.decompress(packed))  # our own bytes
        report["warnings"] = [w.to_dict(self.evaluation.lang) for w in self.profile.warnings]
        if self.tuning is not None:
            report["tuning_loop"] = self.tuning
        return report

    @cached_property
    def _built_report(self) -> dict[str, Any]:
        return build_report(
            self.profile, self.evaluation, self.rules, self.run, self.metrics, self.tuning
        )

    def without_tables(self, host: PluginHost) -> ProfileAnalysis:
        """This analysis with what its outputs need computed now (the report, `host`'s HTML
        sections, the rows its findings' trace snippets show) and the profile's tables
        dropped, all but AOE results (`tuning`, which the tuning loop of the other profiles
        reads); `metrics` are then empty (the report holds them). What is kept per profile is
        small, so a run of many ranks needs memory for the ranks being analysed only."""
        from advisor.traces import window_rows

        kept = {"tuning": self.tables["tuning"]} if "tuning" in self.tables else {}
        profile = self.profile
        return ProfileAnalysis(
            Profile(profile.meta, kept, profile.warnings, profile.providers_run),
            self.evaluation,
            self.rules,
            empty_metrics(),
            self.run,
            self.tuning,
            _packed(build_report(profile, self.evaluation, self.rules, self.run, self.metrics)),
            host.report_sections(self),
            window_rows(profile, self.findings),
        )

    def park(self, spool: Spool) -> None:
        """Move what this analysis without tables keeps for its outputs, its findings and
        packed report, to `spool`: read back on each use, so the outputs of a run of many
        ranks hold one rank's at a time. Where the temporary folder cannot take them (full,
        read-only), they stay in memory: the run still completes."""
        try:
            if self.evaluation.findings:
                self.evaluation.findings = SpooledList(spool, self.evaluation.findings)
            if isinstance(self.packed_report, bytes):
                self.packed_report = spool.put(self.packed_report)
        except OSError:
            pass

    def findings_frame(self) -> pd.DataFrame:
        """This profile's findings as a DataFrame, one row each (columns: see
        AnalysisResult.findings_frame)."""
        from advisor.render.frames import findings_frame

        return findings_frame([(self.profile, self.findings)])

    def _repr_html_(self) -> str:
        """Jupyter shows this profile's report, as report.html does (no script needed)."""
        from advisor.render.html import render_html_fragment

        return render_html_fragment([self.report])


def _packed(report: dict[str, Any]) -> bytes:
    """A report pickled and compressed (the fastest zlib level: a few KB more, ms less)."""
    return zlib.compress(pickle.dumps(report, pickle.HIGHEST_PROTOCOL), 1)


class _Reports(Sequence[dict[str, Any]]):
    """AnalysisResult.report_sequence."""

    def __init__(self, analyses: Sequence[ProfileAnalysis]) -> None:
        self._analyses = analyses

    def __len__(self) -> int:
        return len(self._analyses)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | Sequence[dict[str, Any]]:
        if isinstance(index, slice):
            return _Reports(self._analyses[index])
        return self._analyses[index].report


@dataclass
class AnalysisResult:
    """Everything one run produced, including what could not be read."""

    analyses: list[ProfileAnalysis] = field(default_factory=list)
    input_errors: list[AdvisorError] = field(default_factory=list)
    rule_errors: list[RuleError] = field(default_factory=list)
    rule_overrides: list[str] = field(default_factory=list)
    plugin_problems: list[str] = field(default_factory=list)
    plugins: list[PluginInfo] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the run decided that its reader must know: that profiles of several runs were
    not compared as ranks (cluster.mixed_runs)."""

    @property
    def findings(self) -> list[Finding]:
        return [f for a in self.analyses for f in a.findings]

    @property
    def incomplete(self) -> bool:
        """An input, or a whole file of a profile read, could not be read (exit 3)."""
        return bool(self.input_errors) or any(
            w.unread for a in self.analyses for w in a.profile.warnings
        )

    @property
    def reports(self) -> list[dict[str, Any]]:
        return [a.report for a in self.analyses]

    @property
    def report_sequence(self) -> Sequence[dict[str, Any]]:
        """The reports, each built (or unpacked) when read and not kept: how the outputs of a
        run walk through the reports of many ranks without holding them all at once."""
        return _Reports(self.analyses)

    def tune_ops(self) -> list[str]:
        """Operator names the findings point at, for AOE's --tune_ops_file."""
        return list(dict.fromkeys(op for f in self.findings for op in f.tune_ops))

    @property
    def tables(self) -> list[str]:
        """The names of the tables (normalized and derived) any profile holds, for `table`."""
        from advisor.render.frames import table_names

        return table_names([a.profile for a in self.analyses])

    def table(self, name: str, rank: int | None = None) -> pd.DataFrame:
        """Table `name` as one DataFrame: that of the profile of `rank`, or with no rank every
        profile's rows one after the other, with the profile's rank in a first `rank` column.
        KeyError names the tables or ranks there are when none matches."""
        from advisor.render.frames import profiles_table

        return profiles_table([a.profile for a in self.analyses], name, rank)

    def findings_frame(self) -> pd.DataFrame:
        """Every profile's findings as a DataFrame, one row each: profile, rank (the finding's
        place, 1 = fix first), rule_id, title, severity, impact_us, impact_ratio,
        step_time_if_fixed_us, message."""
        from advisor.render.frames import findings_frame

        return findings_frame([(a.profile, a.findings) for a in self.analyses])

    def _repr_html_(self) -> str:
        """Jupyter shows the report of every profile, as report.html does (no script needed)."""
        from advisor.render.html import render_html_fragment

        return render_html_fragment(self.reports, notes=self.notes)


def read_neighbour_tuning(
    paths: Sequence[Path], profiles: Sequence[Profile], session: Session, result: AnalysisResult
) -> list[Profile]:
    """AOE results next to the profiles read (their folder or the one above), not yet read.

    Only looked for when a profile other than AOE results was read: the results are there to
    close the tuning loop of that profile.
    """
    if all("tuning" in p.tables for p in profiles):
        return []
    read = [
        *paths,
        *(
            f
            for p in profiles
            if "tuning" in p.tables
            for f in files_read(p.meta.path, p.meta.files_read)
        ),
    ]
    neighbours = session.read(neighbour_results(paths, read), jobs=1)
    # Files the user did not name cannot fail the run: their problems are the profiles' warnings.
    for error in neighbours.input_errors:
        for profile in profiles:
            profile.warn(getattr(error, "path", ""), getattr(error, "problem", str(error)))
    result.plugin_problems += neighbours.plugin_problems
    return neighbours.profiles


def attach_tuning_loop(analyses: Sequence[ProfileAnalysis]) -> None:
    """Add to each profile's report what AOE did with the operators advised for it."""
    aoe = [a.profile for a in analyses if "tuning" in a.tables]
    if not aoe:
        return
    tuning = pd.concat([p.tables["tuning"] for p in aoe], ignore_index=True)
    sources = [str(f) for p in aoe for f in files_read(p.meta.path, p.meta.files_read)]
    for analysis in analyses:
        if "tuning" not in analysis.tables:
            advised = list(dict.fromkeys(op for f in analysis.findings for op in f.tune_ops))
            analysis.tuning = tuning_loop(advised, tuning, sources)


@dataclass
class _Staged:
    """A profile through its stage: its analysis, and its summary for the cluster."""

    analysis: ProfileAnalysis
    summary: RankSummary | None


def _stage(session: Session, profile: Profile, keep_tables: bool) -> _Staged:
    """Derive, evaluate and measure one profile read (the same wherever it runs)."""
    present = session.derive(profile)
    rules = session.rules_for(PROFILE)
    analysis = ProfileAnalysis(
        profile,
        session.evaluate(profile, rules, present=present),
        rules,
        profile_metrics(profile),
        session.run,
    )
    summary = rank_summary(profile)
    return _Staged(analysis if keep_tables else analysis.without_tables(session.host), summary)


def _stage_claim(
    claim: Any, recipe: SessionRecipe, keep_tables: bool
) -> tuple[bytes | None, AdvisorError | None]:
    """In a worker: read one claim and stage its profiles with the run's session, opened
    once per worker. Returns them shipped (Session.ship, with the plugin failures the
    worker's host recorded), or the error that made the claim unreadable."""
    session = reopen(recipe)
    profiles = read_claim(claim, session.tables)
    if isinstance(profiles, AdvisorError):
        return None, profiles
    staged = [_stage(session, profile, keep_tables) for profile in profiles]
    return session.ship((staged, session.host.failed())), None


def _staged_profiles(
    session: Session,
    claims: Sequence[Claim],
    reading: Reading,
    *,
    workers: int,
    scheduler: str | None,
    started: Workers | None,
    keep_tables: bool,
) -> Iterator[_Staged]:
    """Every claimed profile staged, claim by claim in the claims' order (input errors go to
    `reading`), read by `workers` processes (those `started`, when given). Workers stage the
    profiles they read when they can open the same session (only installed plugins); else
    they only read, and the stage runs here."""
    if len(claims) == 1 and scheduler is None:
        skip_cycles_for(partial(input_bytes, claims[0].path))
    if session.recipe is not None and (scheduler is not None or workers > 1):
        stage = partial(_stage_claim, recipe=session.recipe, keep_tables=keep_tables)
        mapped = map_claims(stage, claims, workers=workers, scheduler=scheduler, started=started)
        for shipped, error in mapped:
            if error is not None:
                reading.input_errors.append(error)
                continue
            staged, failures = session.unship(shipped or b"")
            for info in failures:
                session.host.mark_failed(info.name, info.error)
            yield from staged
        return
    read = partial(read_claim, tables=session.tables)
    mapped = map_claims(read, claims, workers=workers, scheduler=scheduler, started=started)
    for outcome in mapped:
        if isinstance(outcome, AdvisorError):
            reading.input_errors.append(outcome)
            continue
        staged = [_stage(session, profile, keep_tables) for profile in outcome]
        del outcome  # the profiles as read: not to be held while the next claim is read
        yield from staged


def _mixed_runs_note(mixed: MixedRuns, lang: str) -> str:
    """The note saying why profiles of several runs get no cross-rank analysis."""
    from advisor.render.messages import translator

    tr = translator(lang)
    if mixed.rank is None:
        sizes = (" and " if lang == "en" else "、").join(map(str, mixed.world_sizes))
        return tr("no_cluster_world_sizes", sizes=sizes)
    folder = os.path.commonpath(mixed.paths)
    names = [os.path.relpath(p, folder) if p != folder else Path(p).name for p in mixed.paths]
    shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
    inside = f"{shown} in {folder}" if lang == "en" else f"{folder} 中的 {shown}"
    where = shown if folder in mixed.paths else inside
    return tr("no_cluster_repeated_rank", rank=mixed.rank, n=len(mixed.paths), paths=where)


def analyze(
    *paths: str | Path,
    rules: Sequence[str | Path] = (),
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    params: Mapping[str, Mapping[str, Any]] | None = None,
    host: PluginHost | None = None,
    jobs: int | None = None,
    lang: str | None = None,
    severity: Mapping[str, str] | None = None,
    config: Config | None = None,
    scheduler: str | None = None,
    keep_tables: bool = True,
) -> AnalysisResult:
    """Analyse profiles and return tables, metrics and ranked findings.

    `jobs` is the number of processes that read and analyse several ranks (default: several
    for many or large ranks); `scheduler`, the address of a Dask scheduler (tcp://host:8786),
    runs them on that cluster's workers instead (needs the `dask` extra). Workers evaluate
    the rules too when `host` has only the installed plugins (a plugin passed in `host`
    exists in this process only, so there they only read).
    `lang` ("en" or "zh") is the language of titles, messages and suggestions.
    `severity` fixes rules' severities ({ID: "high"}). `config` (`advisor.config.discover()`
    for what the CLI finds) supplies rules, select, ignore, params, severity and lang; the
    arguments given here win over it.

    `keep_tables=False` analyses the ranks as a stream: each profile's report, findings,
    warnings and the figures the cluster needs are kept, its tables dropped as soon as it is
    evaluated (`ProfileAnalysis.without_tables`), and its findings and report written to a
    temporary file until read (`ProfileAnalysis.park`), so memory is bounded by the jobs,
    not by the ranks. Its analyses then have no tables (but AOE results) and empty
    `metrics`; the reports, findings and the cluster's analysis (tables included) are the
    same as with the default, which keeps every table for notebook use. The command line
    uses it.

    Example:
        >>> result = advisor.analyze("PROF_000001")
        >>> result.analyses[0].tables["steps"].head()
        >>> [f.rule.title for f in result.findings]
    """
    host = host or PluginHost()
    inputs = [Path(p) for p in paths]
    reading = Reading()
    claims = find_claims(inputs, host, reading)
    workers = workers_for(claims, jobs)
    # read here one after another: their traces may be folded ahead while the session opens
    ahead = trace_folds(claims) if workers == 1 and scheduler is None else []
    staged: list[_Staged] = []
    with read_ahead.folding(ahead), local_workers(workers, scheduler) as started:
        session = Session.open(
            host=host,
            config=config,
            rules=rules,
            select=select,
            ignore=ignore,
            params=params,
            severity=severity,
            lang=lang,
        )
        sharing = EvaluationSharing()  # the ranks' records stay in memory until the outputs
        spool = None if keep_tables else Spool(session.ship, session.unship)
        for item in _staged_profiles(
            session,
            claims,
            reading,
            workers=workers,
            scheduler=scheduler,
            started=started,
            keep_tables=keep_tables,
        ):
            sharing.share(item.analysis.evaluation)
            if spool is not None:
                item.analysis.park(spool)
            staged.append(item)
    result = AnalysisResult(
        rule_errors=session.rule_errors,
        rule_overrides=session.ruleset.overrides,
        plugins=session.host.infos,
        rules=session.rules,
    )
    result.input_errors += reading.input_errors
    result.plugin_problems += reading.plugin_problems
    staged.sort(key=lambda s: numeric_order(s.analysis.profile))
    profiles = [s.analysis.profile for s in staged]
    staged += [
        _stage(session, neighbour, keep_tables)
        for neighbour in read_neighbour_tuning(inputs, profiles, session, result)
    ]
    result.analyses += [s.analysis for s in staged]
    attach_tuning_loop(result.analyses)
    summaries = [s.summary for s in staged if s.summary is not None]
    mixed = mixed_runs(summaries, [s.analysis.profile.meta for s in staged])
    if mixed is not None:
        result.notes.append(_mixed_runs_note(mixed, session.lang))
    cluster = None if mixed is not None else cluster_profile(summaries)
    cross_rank = session.rules_for(CLUSTER)
    if cluster is not None and cross_rank:
        result.analyses.append(
            ProfileAnalysis(
                cluster,
                session.evaluate(cluster, cross_rank),
                cross_rank,
                profile_metrics(cluster),
                session.run,
            )
        )
    return result
