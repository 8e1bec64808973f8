"""Many ranks as a stream (analyze(keep_tables=False), what `advisor run` uses) and in workers:
the same reports and cluster as the in-memory path, and no rank's tables kept once reduced."""

from __future__ import annotations

import dataclasses
import gc
import json
import multiprocessing
import pickle
import shutil
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from conftest import FIXTURE_DIR, REAL

import advisor
import advisor.api
import advisor.outputs
import advisor.spool
from advisor.api import AnalysisResult
from advisor.engine.evaluate import Evaluation, Finding, Outcome
from advisor.engine.sharing import EvaluationSharing
from advisor.executors import IN_FLIGHT_PER_SLOT, ordered_map
from advisor.hookspecs import ReportSection, hookimpl
from advisor.metrics import ProfileMetrics, empty_metrics
from advisor.model import PROFILE, Profile
from advisor.outputs import render_outputs
from advisor.plugin_manager import PluginHost
from advisor.reading import local_workers
from advisor.session import Session, SessionMismatch, reopen
from advisor.spool import Spool, Spooled, SpooledList

DDP4 = sorted((FIXTURE_DIR / "kineto_own").glob("ddp4_rank*.pt.trace.json.gz"))
MINDSPORE_CLUSTER = REAL / "mindspore_cluster_4rank"


@pytest.fixture
def ddp4(tmp_path: Path) -> Path:
    """The own 4-rank DDP traces, one claim each, copied (fixtures stay untouched)."""
    folder = tmp_path / "ddp4"
    folder.mkdir()
    for trace in DDP4:
        shutil.copy(trace, folder)
    return folder


def comparable(result: AnalysisResult) -> list[dict[str, Any]]:
    """Every report but the time it was generated."""
    reports = []
    for report in result.reports:
        report = {**report, "advisor": dict(report["advisor"])}
        del report["advisor"]["generated_at"]
        reports.append(report)
    return reports


def assert_same(result: AnalysisResult, reference: AnalysisResult) -> None:
    assert not result.input_errors and not reference.input_errors
    assert comparable(result) == comparable(reference)
    assert [a.profile.meta for a in result.analyses] == [a.profile.meta for a in reference.analyses]
    cluster, expected = result.analyses[-1], reference.analyses[-1]
    assert cluster.profile.meta.source_format == expected.profile.meta.source_format == "cluster"
    pd.testing.assert_frame_equal(cluster.tables["ranks"], expected.tables["ranks"])
    assert cluster.tables.keys() == expected.tables.keys()
    for name in cluster.tables:
        pd.testing.assert_frame_equal(cluster.tables[name], expected.tables[name])


def test_stream_gives_the_in_memory_reports_and_cluster_on_the_ddp4_traces(ddp4):
    reference = advisor.analyze(ddp4, jobs=1)
    assert_same(advisor.analyze(ddp4, jobs=1, keep_tables=False), reference)


def test_stream_gives_the_in_memory_reports_and_cluster_on_the_mindspore_cluster():
    reference = advisor.analyze(MINDSPORE_CLUSTER, jobs=1)
    assert "links" in reference.analyses[-1].tables  # the summaries carry the link rows too
    assert_same(advisor.analyze(MINDSPORE_CLUSTER, jobs=1, keep_tables=False), reference)


@pytest.mark.integration
def test_workers_evaluate_and_give_the_same_reports(ddp4):
    reference = advisor.analyze(ddp4, jobs=1)
    for keep_tables in (False, True):
        result = advisor.analyze(ddp4, jobs=2, keep_tables=keep_tables)
        assert_same(result, reference)
        # shipped back as references: the findings' rules are this process's own
        ids = {id(rule) for rule in result.rules}
        assert result.findings and all(id(f.rule) in ids for f in result.findings)
    kept = advisor.analyze(ddp4, jobs=2)
    assert kept.analyses[0].tables["host_ops"].equals(reference.analyses[0].tables["host_ops"])


def test_workers_start_before_the_session_opens(ddp4, monkeypatch):
    """Their start (spawned interpreters importing pandas) runs while the session opens."""
    children: list[int] = []
    original = Session.open.__func__  # type: ignore[attr-defined]

    def open_(cls, **kwargs):
        children.append(len(multiprocessing.active_children()))
        return original(cls, **kwargs)

    monkeypatch.setattr(Session, "open", classmethod(open_))
    assert_same(advisor.analyze(ddp4, jobs=2), advisor.analyze(ddp4, jobs=1))
    assert children == [2, 0]


def test_started_workers_have_imported_pandas_before_their_first_task():
    with local_workers(2, None) as started:
        assert started is not None and started[1] == 2
        executor, _ = started
        # eval, a built-in, unpickles without importing anything
        assert executor.submit(eval, "'pandas' in __import__('sys').modules").result()
    with local_workers(1, None) as none_here, local_workers(4, "tcp://host:8786") as on_dask:
        assert none_here is None and on_dask is None


def assert_ranks_share_records(result: AnalysisResult) -> None:
    """Equal evaluation records of the ranks are one object (EvaluationSharing)."""
    first, *others = [a.evaluation for a in result.analyses[:-1]]
    assert others and first.params and first.not_applicable and first.inapplicable
    for other in others:
        assert other.params is first.params  # the same rules and params on every rank
        for field in ("outcomes", "inapplicable", "not_applicable"):
            mine, theirs = getattr(other, field), getattr(first, field)
            assert (mine is theirs) == (mine == theirs), field


def test_ranks_share_equal_evaluation_records(ddp4):
    """The ranks' params, outcomes and not-applicable records are kept once (for the ranks
    shipped back by workers: the next test); the reports stay those of the in-memory path
    (the stream and worker tests above compare them)."""
    assert_ranks_share_records(advisor.analyze(ddp4, jobs=1, keep_tables=False))


@pytest.mark.integration
def test_ranks_shipped_back_by_workers_share_equal_records(ddp4):
    result = advisor.analyze(ddp4, jobs=2, keep_tables=False)
    assert_ranks_share_records(result)
    metrics = {id(a.metrics) for a in result.analyses[:-1]}
    assert len(metrics) == 1 and result.analyses[0].metrics is empty_metrics()


def test_sharing_keeps_records_that_differ_apart():
    """Params that print differently (1 and 1.0: JSON writes both as given) and records
    holding a NaN stay each evaluation's own; equal ones become one."""
    sharing = EvaluationSharing()
    first = Evaluation(params={"A": {"x": 1}, "B": {"y": 2.0}})
    second = Evaluation(params={"A": {"x": 1.0}, "B": {"y": 2.0}})
    third = Evaluation(params={"A": {"x": float("nan")}, "B": {"y": 2.0}})
    fourth = Evaluation(params={"A": {"x": float("nan")}, "B": {"y": 2.0}})
    for evaluation in (first, second, third, fourth):
        sharing.share(evaluation)
    assert second.params["A"] == {"x": 1.0} and type(second.params["A"]["x"]) is float
    assert second.params["A"] is not first.params["A"]
    assert second.params["B"] is first.params["B"] is third.params["B"]
    assert fourth.params["A"] is not third.params["A"]
    outcomes = {"A": Outcome.FIRED}
    again = Evaluation(outcomes={"A": Outcome.FIRED})
    other = Evaluation(outcomes={"A": Outcome.PASSED})
    for evaluation in (Evaluation(outcomes=outcomes), again, other):
        sharing.share(evaluation)
    assert again.outcomes is outcomes and other.outcomes == {"A": Outcome.PASSED}


def test_metrics_without_figures_unpickle_as_one_object():
    assert pickle.loads(pickle.dumps(ProfileMetrics())) is empty_metrics()
    figures = ProfileMetrics(steps=pd.DataFrame({"step": [1], "duration_us": [2.5]}), host={"k": 1})
    copy = pickle.loads(pickle.dumps(figures, pickle.HIGHEST_PROTOCOL))
    assert copy is not figures and copy.host == {"k": 1} and copy.core_types.empty
    pd.testing.assert_frame_equal(copy.steps, figures.steps)


def test_reduced_ranks_keep_no_table(ddp4, monkeypatch):
    """Once analysed, no table of a rank stays alive (its report has the figures); with
    keep_tables every one does."""
    real_derive = Session.derive
    for keep_tables in (False, True):
        derived: list[weakref.ref[pd.DataFrame]] = []

        def derive(session, profile, *args, derived=derived):
            real_derive(session, profile, *args)
            derived.extend(weakref.ref(frame) for frame in profile.tables.values())

        monkeypatch.setattr(Session, "derive", derive)
        result = advisor.analyze(ddp4, jobs=1, keep_tables=keep_tables)
        gc.collect()
        alive = sum(ref() is not None for ref in derived)
        *ranks, cluster = result.analyses
        assert len(ranks) == 4 and len(derived) >= 4 * 10  # ten tables or more per rank
        if keep_tables:
            assert alive == len(derived)
            continue
        assert alive == 0
        for analysis in ranks:
            assert analysis.tables == {} and analysis.metrics.steps.empty
            assert analysis.report["metrics"]["steps"]  # the report holds the figures
        assert "ranks" in cluster.tables  # the cluster's own tables are kept: a row per rank


def test_reduced_ranks_keep_their_report_packed_and_outputs_do_not_keep_it(ddp4, tmp_path):
    """A reduced rank keeps its report as compressed bytes, unpacked when read and never kept
    as objects, also by the outputs (the JSON rendered as each file is written, the HTML and
    the summary reading one report at a time): a run of 1,000 ranks held 170 MB of them."""
    result = advisor.analyze(ddp4, jobs=1, keep_tables=False)
    *ranks, cluster = result.analyses
    for analysis in ranks:
        assert isinstance(analysis.packed_report, Spooled)  # on disk (the next tests)
        assert len(analysis.packed_report.load()) < len(json.dumps(analysis.report)) / 2
        assert analysis.report == analysis.report and analysis.report is not analysis.report
    outputs = render_outputs(result, ["json", "html"], PluginHost())
    json_files = [name for name in outputs if name.endswith(".json")]
    assert len(json_files) == 5 and all(callable(outputs[name]) for name in json_files)
    written = advisor.outputs.write_files(tmp_path / "out", outputs)
    assert {p.name for p in written} == {*json_files, "report.html"}
    for name, analysis in zip(json_files, result.analyses):
        assert json.loads((tmp_path / "out" / name).read_text()) == json.loads(
            json.dumps(analysis.report)
        )
    assert all("_built_report" not in vars(a) for a in ranks)  # nothing cached the objects
    assert "_built_report" in vars(cluster)  # the cluster's report is built from its tables


def test_reduced_ranks_keep_their_findings_on_disk():
    """A reduced rank's findings are in the run's spool, not in memory (a run of 1,024 ranks
    kept 27 MB of them), and read back as they were: the same ranks, messages and evidence
    (the reports above are compared whole), with this session's rules."""
    reference = advisor.analyze(MINDSPORE_CLUSTER, jobs=1)
    result = advisor.analyze(MINDSPORE_CLUSTER, jobs=1, keep_tables=False)
    gc.collect()
    alive = [o for o in gc.get_objects() if isinstance(o, Finding) and o.rule.scope == PROFILE]
    expected = [f for a in reference.analyses[:-1] for f in a.findings]
    assert {id(f) for f in alive} == {id(f) for f in expected}  # none of the reduced run's
    *ranks, _ = result.analyses
    assert all(isinstance(a.findings, SpooledList) for a in ranks)
    found = [f for a in ranks for f in a.findings]
    assert [(f.rule.id, f.rank, f.message, f.evidence) for f in found] == [
        (f.rule.id, f.rank, f.message, f.evidence) for f in expected
    ]
    rules = {id(rule) for rule in result.rules}
    assert found and all(id(f.rule) in rules for f in found)
    assert [list(a.findings) for a in ranks] == [list(a.findings) for a in ranks]  # re-read


def test_a_temporary_folder_that_takes_nothing_keeps_the_ranks_in_memory(monkeypatch):
    """A full or read-only temporary folder costs memory, not the run."""
    reference = advisor.analyze(MINDSPORE_CLUSTER, jobs=1, keep_tables=False)

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(advisor.spool.tempfile, "TemporaryFile", refuse)
    result = advisor.analyze(MINDSPORE_CLUSTER, jobs=1, keep_tables=False)
    *ranks, _ = result.analyses
    assert all(isinstance(a.findings, list) and a.findings for a in ranks)
    assert all(isinstance(a.packed_report, bytes) for a in ranks)
    assert comparable(result) == comparable(reference)


def test_spool_reads_back_each_value_and_a_list_knows_its_length_unread(monkeypatch):
    spool = Spool(pickle.dumps, pickle.loads)
    first, second = spool.put({"a": [1, 2.5]}), spool.put("second")
    assert (second.load(), first.load(), first.load()) == (
        "second",
        {"a": [1, 2.5]},
        {"a": [1, 2.5]},
    )
    assert first.load() is not first.load()  # read anew, never held
    items = SpooledList(spool, [3, 1, 2])
    reads: list[int] = []
    real_read = Spool.read
    monkeypatch.setattr(Spool, "read", lambda self, *a: reads.append(1) or real_read(self, *a))
    assert len(items) == 3 and bool(items) and not reads
    assert list(items) == [3, 1, 2] and len(reads) == 1  # a loop reads once
    assert (items[0], items[-1], items[1:]) == (3, 2, [1, 2])
    assert items == [3, 1, 2] and items != [3, 1] and items == SpooledList(spool, (3, 1, 2))
    reads.clear()
    assert list(SpooledList(spool, [])) == [] and not reads  # nothing to read


def test_a_rank_is_dropped_before_the_next_is_read(ddp4, monkeypatch):
    """Memory is bounded by the jobs: when a rank is read (one job here), no profile read
    earlier (holding that rank's tables) is alive any more; with keep_tables all are."""
    real_read_claim = advisor.api.read_claim
    for keep_tables, expected in ((False, [0, 0, 0, 0]), (True, [0, 1, 2, 3])):
        earlier: list[weakref.ref[Profile]] = []
        alive: list[int] = []

        def read_claim(claim, tables, earlier=earlier, alive=alive):
            gc.collect()
            alive.append(sum(ref() is not None for ref in earlier))
            profiles = real_read_claim(claim, tables)
            earlier += [weakref.ref(p) for p in profiles]
            return profiles

        monkeypatch.setattr(advisor.api, "read_claim", read_claim)
        advisor.analyze(ddp4, jobs=1, keep_tables=keep_tables)
        assert alive == expected


def test_ordered_map_keeps_few_items_in_flight():
    submitted: list[int] = []
    consumed: list[int] = []
    most = 0

    def work(item: int) -> int:
        return item * 2

    with ThreadPoolExecutor(3) as executor:
        original = executor.submit

        def submit(fn, item):
            submitted.append(item)
            return original(fn, item)

        executor.submit = submit  # type: ignore[method-assign]
        for result in ordered_map(executor, work, range(40), slots=3):
            most = max(most, len(submitted) - len(consumed))
            consumed.append(result)
    assert consumed == [i * 2 for i in range(40)]
    assert most == IN_FLIGHT_PER_SLOT * 3


def test_a_worker_with_other_rules_refuses():
    session = Session.open(select=["STEP-001"])
    assert session.recipe is not None
    assert reopen(session.recipe).recipe == session.recipe
    wrong = dataclasses.replace(session.recipe, selected=(("STEP-001", "elsewhere.yaml"),))
    with pytest.raises(SessionMismatch, match="other rules than this run"):
        reopen(wrong)


def test_a_session_with_the_callers_plugins_is_not_reopened_in_workers():
    assert Session.open(host=PluginHost()).recipe is not None
    assert Session.open(host=PluginHost(extra=[("mine", SimpleNamespace())])).recipe is None


def test_plugin_sections_see_the_tables_before_they_are_dropped(ddp4):
    @hookimpl
    def advisor_report_sections(analysis):
        steps = analysis.tables.get("steps")
        return (
            [ReportSection("Steps seen", f"<p>{len(steps)} steps</p>")] if steps is not None else []
        )

    plugin = SimpleNamespace(advisor_report_sections=advisor_report_sections)
    host = PluginHost(extra=[("sections", plugin)])
    result = advisor.analyze(ddp4, host=host, jobs=2, keep_tables=False)
    html = render_outputs(result, ["html"], host)["report.html"]
    assert html.count("<p>6 steps</p>") == 4 and host.failed() == []
