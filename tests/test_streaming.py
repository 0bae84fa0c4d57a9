"""The streaming runner's parts: lanes, one flight per request, the health check, the stream of instances."""

from __future__ import annotations

import threading
import time

import pytest

from cpdagthink.backends.base import BackendError
from cpdagthink.causal.instance import Instance
from cpdagthink.method.chat import Completion
from cpdagthink.run.records import RunRecord, TurnRecord
from cpdagthink.run.streaming import LEAST, WINDOW, Health, Lanes, RetriesExhausted, RunAborted, ask_once, stream


def _instance(n: int) -> Instance:
    return Instance(id=f"row-{n}", premise="Premise: x", hypothesis="y", num_variables=2, template="parent", label=1,
                    split="test", source="here")


def _record(instance: Instance, fresh: int = 2) -> RunRecord:
    turns = [TurnRecord(messages_sha256="m", request_sha256="r", cache_hit=False) for _ in range(fresh)]
    return RunRecord(id=instance.id, content_sha256="c", condition="structured", split="test", num_variables=2,
                     template="parent", gold_label=1, oracle_label=1, turns=turns)


def test_lanes_run_jobs_first_come_first_served():
    lanes, ran, gate, last = Lanes(1), [], threading.Event(), threading.Event()
    lanes.post(gate.wait)
    for n in range(3):
        lanes.post(lambda n=n: ran.append(n))
    lanes.post(last.set)
    assert ran == []  # the one lane waits on the first job
    gate.set()
    assert last.wait(timeout=5) and ran == [0, 1, 2]


def test_a_request_asked_by_two_threads_at_once_is_asked_once():
    stored: dict[str, Completion] = {}
    asked, entered = [], threading.Event()

    def ask() -> Completion:
        entered.set()
        time.sleep(0.2)  # the other thread comes while this one is asking
        asked.append(1)
        stored["k"] = Completion(text="answer")
        return stored["k"]

    found = []
    other = threading.Thread(target=lambda: (entered.wait(), found.append(ask_once("f", "k", lambda: stored.get("k"),
                                                                                   ask))))
    other.start()
    found.append(ask_once("f", "k", lambda: stored.get("k"), ask))
    other.join()
    assert len(asked) == 1 and sorted(hit for _, hit in found) == [False, True]
    assert {c.text for c, _ in found} == {"answer"}


def test_the_health_check_waits_for_enough_requests_then_stops_at_the_share():
    health = Health(0.5)
    for _ in range(LEAST - 1):
        health.failed("HTTP 503")
    health.check()  # too few seen to judge
    health.failed("HTTP 503")
    with pytest.raises(RunAborted, match=f"{LEAST} of the last {LEAST} requests failed every attempt.*HTTP 503"):
        health.check()


def test_the_health_check_looks_at_the_last_requests_only_and_never_stops_without_a_share():
    health = Health(0.5)
    for _ in range(WINDOW):
        health.failed("early")
    for _ in range(WINDOW // 2 + 1):
        health.answered(_record(_instance(0), fresh=2))  # 2 fresh requests answered each
    health.check()  # the failures have left the window
    never = Health(None)
    for _ in range(WINDOW):
        never.failed("x")
    never.check()


def test_a_stream_leaves_exhausted_instances_unanswered_and_keeps_the_others_as_they_finish():
    todo = [_instance(n) for n in range(6)]

    def make(instance: Instance) -> RunRecord:
        if instance.id == "row-3":
            raise RetriesExhausted("endpoint e unreachable or failing after 5 attempts")
        time.sleep(0.05 if instance.id == "row-0" else 0)
        return _record(instance)

    kept: list[str] = []
    unanswered = stream(todo, make, Lanes(3), Health(0.5), lambda r: kept.append(r.id), threading.Event())
    assert unanswered == {"row-3": "endpoint e unreachable or failing after 5 attempts"}
    assert sorted(kept) == ["row-0", "row-1", "row-2", "row-4", "row-5"] and kept[-1] == "row-0"


def test_a_fatal_error_stops_the_stream_and_what_had_not_begun_is_never_made():
    made: list[str] = []

    def make(instance: Instance) -> RunRecord:
        made.append(instance.id)
        raise BackendError("HTTP 401: no retry mends it")

    with pytest.raises(BackendError, match="401"):
        stream([_instance(n) for n in range(20)], make, Lanes(2), Health(0.5), lambda r: None, threading.Event())
    time.sleep(0.1)
    assert len(made) <= 2


def test_a_set_stop_interrupts_the_stream():
    stop = threading.Event()
    stop.set()
    with pytest.raises(KeyboardInterrupt, match="interrupted"):
        stream([_instance(0)], _record, Lanes(1), Health(0.5), lambda r: None, stop)
