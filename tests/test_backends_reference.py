"""The reference agent: oracle CPDAG in turn 1, answers from whatever graph turn 2 shows."""

from __future__ import annotations

from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.causal.oracle import label_text
from cpdagthink.method.chat import Request
from cpdagthink.method.conditions import CONDITIONS, Turn2Input, first_request, parse_answer, second_request
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.schema import CausalAnalysis, parse_analysis
from cpdagthink.run.data import read_csv


def test_reference_agent_reproduces_the_oracle_on_real_rows(test_csv):
    agent = ReferenceBackend()
    for instance in read_csv(test_csv)[::40]:
        turn1 = agent.complete(first_request(CONDITIONS["structured"], instance, Decoding()))
        assert parse_analysis(turn1.tool_calls[0].arguments)
        turn2 = agent.complete(second_request(CONDITIONS["structured"], instance, Decoding(), turn1))
        assert parse_answer(turn2.text) == ("YES" if label_text(instance.text).label else "NO")
        one = agent.complete(first_request(CONDITIONS["baseline_enhanced"], instance, Decoding()))
        assert parse_answer(one.text) == parse_answer(turn2.text)


def test_answers_follow_the_graph_it_is_shown(test_csv):
    agent = ReferenceBackend()
    instance = next(i for i in read_csv(test_csv) if i.label == 1 and i.template == "parent")
    turn1 = agent.complete(first_request(CONDITIONS["structured"], instance, Decoding()))
    emitted = parse_analysis(turn1.tool_calls[0].arguments)
    flipped = emitted.model_copy(update={"directed_edges": [(b, a) for a, b in emitted.directed_edges]})
    turn2 = agent.complete(second_request(CONDITIONS["structured"], instance, Decoding(), turn1, Turn2Input(flipped, note="flip")))
    assert parse_answer(turn2.text) == "NO"


def test_turn_two_reports_the_verdict_of_the_graph_it_is_shown():
    agent = ReferenceBackend()
    cyclic = CausalAnalysis(variables=["A", "B", "C"], skeleton=[("A", "B"), ("B", "C"), ("A", "C")], separating_sets=[],
                            v_structures=[], directed_edges=[("A", "B"), ("B", "C"), ("C", "A")], undirected_edges=[])
    request = Request(messages=({"role": "user", "content": "Hypothesis: A directly causes B."},
                                {"role": "tool", "content": cyclic.model_dump_json()}))
    verdict = cyclic.answer("A directly causes B.")
    assert agent.complete(request).text == f"{verdict.detail}.\nAnswer: NO"
    assert verdict.detail.startswith("graph unusable:")


def test_the_reference_agent_follows_the_design_points_names_and_delivery(test_csv, tmp_path):
    """Under neutral field names it emits them and reads them back; a turn 2 that shows the object in a user
    message is answered from that object, so every typed cell of chapter 07 answers as the oracle does."""
    from cpdagthink.run.config import RunConfig
    from cpdagthink.run.runner import run_config

    rows = read_csv(test_csv)[400:412]
    for name in ("typed.regex.neutral.user.bare", "typed.none.paper.user.e2", "typed.regex.neutral.tool.e2",
                 "light_prose"):
        config = RunConfig(backend="reference", condition=name, cache_dir=str(tmp_path / "cache"))
        result = run_config(config, ReferenceBackend(), rows, tmp_path / name, progress=False)
        assert all(r.emitted_error is None and r.prediction == r.oracle_label for r in result.records), name
        if "neutral" in name:
            assert '"field_a"' in result.records[0].turns[0].tool_calls[0].arguments
