"""End to end on a real local model (SmolLM2-135M): every condition, the regex holding, cache and resume."""

from __future__ import annotations

import json
import re

import pytest

from cpdagthink.method.conditions import CONDITIONS, Flow, first_request, variables_of
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.field_names import paper_arguments
from cpdagthink.method.schema import instance_model
from cpdagthink.run.data import read_csv
from cpdagthink.run.runner import run_config
from conftest import configured
from dying_backend import DiesAfter, Killed

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2():
    from cpdagthink.backends.local import LocalBackend

    backend = LocalBackend("smollm2-135m")
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def small_items(test_csv):
    rows = [i for i in read_csv(test_csv) if i.num_variables == 2]
    return rows[:2]  # the shortest prompts: one premise, two hypotheses (each a call of its own)


# Room for a whole constrained two-variable analysis (SmolLM2 ends it in about 110 tokens), prose cut short.
DECODING = Decoding(max_tokens_turn1=160, max_tokens_answer=16)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


CHECKED = [name for name in CONDITIONS if "." not in name] + ["typed.regex.neutral.user.bare",
                                                              "typed.none.neutral.user.bare"]


@pytest.fixture(scope="module")
def runs(smollm2, small_items, cache, tmp_path_factory):
    """Every named condition once, in declaration order (structured first), and of chapter 07's design cells the
    one farthest from the paper's on every typed factor (neutral names in a user message, the bare question, with
    and without the regex), sharing one call cache: the other cells combine the same levels."""
    out = tmp_path_factory.mktemp("runs")
    return {name: run_config(configured(name, cache_dir=cache, decoding=DECODING),
                             smollm2, small_items, out / name, progress=False)
            for name in CHECKED}


def test_every_condition_end_to_end(runs, small_items):
    from cpdagthink.backends.local.backend import output_regex

    for name, result in runs.items():
        condition = CONDITIONS[name]
        assert [r.id for r in result.records] == [i.id for i in small_items], name
        for record, instance in zip(result.records, small_items):
            assert record.answer in ("YES", "NO", None) and not record.rejected
            assert record.prediction == (None if record.answer is None else int(record.answer == "YES"))
            assert all(t.prompt_tokens > 0 and t.latency_s > 0 for t in record.turns if not t.cache_hit)
            if condition.flow is Flow.TOOL and condition.constrained:
                turn1 = record.turns[0]
                assert re.fullmatch(output_regex(first_request(condition, instance, DECODING)), turn1.raw), turn1.raw
                # the constraint kept the names the instance's (the parser alone would not refuse others)
                arguments = turn1.tool_calls[0].arguments
                paper = paper_arguments(arguments) if condition.field_names == "neutral" else json.loads(arguments)
                assert instance_model(variables_of(instance)).model_validate(paper)
                assert record.emitted is not None and record.emitted_error is None


def test_second_run_is_all_cache_hits(runs, smollm2, small_items, cache, tmp_path):
    again = run_config(configured("structured", cache_dir=cache, decoding=DECODING),
                       smollm2, small_items, tmp_path / "again", progress=False)
    assert runs["structured"].model_calls == 4 and again.model_calls == 0
    assert all(t.cache_hit for r in again.records for t in r.turns)
    assert [r.answer for r in again.records] == [r.answer for r in runs["structured"].records]


def test_no_thinking_on_a_model_without_thinking_reuses_the_structured_calls(runs):
    assert runs["no_thinking"].model_calls == 0


def test_interrupted_local_run_resumes_without_duplicates(smollm2, small_items, tmp_path):
    condition, decoding = CONDITIONS["baseline_enhanced"], Decoding(max_tokens_turn1=8, max_tokens_answer=8)
    with pytest.raises(Killed):
        run_config(configured(condition.name, cache_dir=tmp_path / "c", decoding=decoding, chunk_size=1),
                   DiesAfter(smollm2, 1), small_items, tmp_path / "r", progress=False)
    resumed = run_config(configured(condition.name, cache_dir=tmp_path / "c", decoding=decoding, chunk_size=1),
                         smollm2, small_items, tmp_path / "r", progress=False)
    assert [r.id for r in resumed.records] == [i.id for i in small_items] and resumed.model_calls == 1
