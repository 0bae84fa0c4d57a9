"""Generated instances: the dataset's format, oracle labels, the stress families and the perturbations."""

from __future__ import annotations

import shutil

import networkx as nx
import pytest

from cpdagthink.causal.oracle import label_text
from cpdagthink.causal.premise import PARAPHRASE_WORDINGS, paraphrase_hypothesis, parse_hypothesis, parse_premise, split_input
from cpdagthink.cli import main
from cpdagthink.run.data import read_csv
from cpdagthink.run.generate import (FAMILIES, STRESS_SIZES, generate, instances_from_dag, perturb, read_edges,
                                     write_instances)


@pytest.mark.parametrize("family, n", [("random7", 7), ("alarm7", 7), ("asia8", 8)])
def test_stress_families_are_labelled_by_the_oracle_and_deterministic(family, n):
    rows = generate(family, seed=1, graphs=3, per_graph=12)
    assert rows == generate(family, seed=1, graphs=3, per_graph=12)
    assert all(r.num_variables == n and r.source.startswith(f"generated:{family}") for r in rows)
    assert all(label_text(r.input).label == r.label for r in rows)
    assert 0 < sum(r.label for r in rows) < len(rows)


def test_alarm_subgraphs_are_connected_induced_subgraphs():
    alarm = read_edges("data/graphs/alarm.edges")
    assert alarm.number_of_nodes() == 37 and alarm.number_of_edges() == 46
    for row in generate("alarm7", seed=3, graphs=4, per_graph=2):
        legend = dict(item.split("=") for item in row.source.split()[-1].split(","))
        sub = alarm.subgraph(legend.values())
        assert nx.is_weakly_connected(sub) and sub.number_of_nodes() == 7


def test_any_dag_lists_every_separating_set(tmp_path):
    dag = nx.DiGraph([("A", "C"), ("B", "C"), ("C", "D")])
    rows = instances_from_dag(dag, 10, __import__("random").Random(0), "generated:test")
    facts = parse_premise(split_input(rows[0].input)[0])
    assert facts.independent("A", "B") and facts.independent("A", "D", {"C"}) and facts.independent("A", "D", {"B", "C"})
    written = read_csv(write_instances(rows, tmp_path / "g.csv"))
    assert [i.label for i in written] == [r.label for r in rows]


def test_perturbations_keep_labels_and_change_the_surface(test_csv):
    original = read_csv(test_csv)[::97]
    from cpdagthink.run.generate import perturb

    for family in ("refactor", "paraphrase"):
        rows = perturb(original, family, seed=5)
        assert rows == perturb(original, family, seed=5)
        for row, source in zip(rows, original):
            assert row.input != source.text and row.label == source.label
            assert row.source.startswith(f"generated:{family}")
            assert label_text(row.input).label == label_text(source.text).label
    refactored = perturb(original, "refactor", seed=5)[0]
    assert not set(parse_premise(split_input(refactored.input)[0]).variables) & set("ABCDEF"[: original[0].num_variables])


def test_every_row_of_the_test_split_keeps_its_oracle_label_in_the_generator_paraphrase(test_csv):
    """The whole split, reworded with the Corr2Cause generator's paraphrase templates (what its Paraphrase-OOD
    split uses), parses and keeps every oracle label."""
    original = read_csv(test_csv)
    rows = perturb(original, "paraphrase", seed=0)
    assert len(rows) == len(original) == 1162
    templates = set(PARAPHRASE_WORDINGS.values())
    for row, source in zip(rows, original):
        hypothesis = split_input(row.input)[1]
        query = parse_hypothesis(hypothesis)
        assert paraphrase_hypothesis(query) == hypothesis and PARAPHRASE_WORDINGS[query.relation] in templates
        assert label_text(row.input).label == label_text(source.text).label
        assert (row.label, row.template, row.num_variables) == (source.label, source.template, source.num_variables)


def test_unknown_family_and_missing_source():
    with pytest.raises(ValueError):
        generate("grid9")
    with pytest.raises(ValueError, match="--data"):
        generate("refactor")
    assert set(FAMILIES) == {"random7", "alarm7", "asia8", "refactor", "paraphrase"}


@pytest.mark.parametrize("graphs, per_graph, flag", [(0, 20, "--graphs"), (-3, 20, "--graphs"), (2, 0, "--per-graph"),
                                                     (2, -1, "--per-graph")])
def test_a_stress_set_of_no_rows_is_refused(graphs, per_graph, flag):
    with pytest.raises(ValueError, match=f"{flag} must be at least 1 \\(got {min(graphs, per_graph)}\\)"):
        generate("random7", seed=0, graphs=graphs, per_graph=per_graph)


def test_generate_refuses_an_out_that_is_its_own_data(test_csv, tmp_path, capsys):
    """`generate --out` naming the `--data` CSV (however spelled) would replace the source by its perturbation."""
    source = tmp_path / "source.csv"
    shutil.copy(test_csv, source)
    before = source.read_bytes()
    for out in (source, tmp_path / "." / "source.csv"):
        assert main(["generate", "--family", "refactor", "--data", str(source), "--out", str(out)]) == 2
        assert "is the input CSV" in capsys.readouterr().err
    assert source.read_bytes() == before


def test_stress_families_default_to_the_papers_size():
    asia = generate("asia8", seed=0)
    assert len(asia) == STRESS_SIZES["asia8"].paper_n == 40  # App. C, Table 7: the ASIA-derived row's N
    assert 0 < sum(r.label for r in asia) < len(asia)
    assert STRESS_SIZES["random7"].paper_n is None and STRESS_SIZES["alarm7"].paper_n is None
    assert len(generate("random7", seed=0, graphs=2)) == 2 * STRESS_SIZES["random7"].per_graph
