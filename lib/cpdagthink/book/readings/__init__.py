"""What each chapter says about its tables: the numbers its prose quotes and the sentences it computes.

A :class:`Reading` holds numbers (pasted into a page's markdown with ``{glue:text}`name:.1f```), phrases
(computed sentences and counts with their nouns in the right number, each a :class:`markup.Markdown` built
from typed parts, pasted with ``{glue:md}`name``` or, when they hold no markup, ``{glue:text}`name```) and
small tables (pasted with the ``{glue}`` directive). Each chapter's function builds them from the same frames its tables show,
so the prose and the tables can never disagree; :meth:`Reading.glue` hands them to myst-nb. The paper's
figures enter the prose the same way, read from ``data/paper_reported.csv``.

Each chapter's reading is a module of its own (``results`` for chapter 01, ``bins`` 02, ``removals`` 03,
``probing`` 04, ``graph_audit`` 05, ``gallery`` 06) around ``glue``, what every page uses, and ``verdicts``, what a
key figure rests on. The notebooks call them all through this package's names.
"""

from __future__ import annotations

from .glue import (TARGET, BASELINE, REFERENCE, AGREES, AGAINST, NO_EFFECT, UNDECIDED, claim_status, Reading,
                   glue_figure, show_figure, fill_command, not_run, trivial_phrase, constant_phrase, scale_phrase,
                   signed, sentence, p_value, gain_clause, per_seed_gains, sample_phrases, paper_numbers, Headline,
                   first_screen, label_gaps_note)
from .verdicts import MIN_ROWS, answer_causes, pair_causes, verdict, paired_headline
from .results import (MAIN_CONDITIONS, PRIMARY_SEED, THREE_SEEDS, main_summary_table, budget_note, answer_reading,
                      main_results, show_cost)
from .bins import (omission_sentence, paper_bin_key, bin_gain_table, bin_headline, bin_gains_sentence, stress_table,
                   stress_caveats, counted_stress, complexity, complexity_gains, show_bin_gains, show_ood, show_stress)
from .removals import (ABLATIONS, ablation_table, NO_OBJECT, NOT_APPLIED, not_applied, ignored_by_backend,
                       ablation_phrase, scale_table, tool_choice_table, ablations, ablation_headline)
from .probing import probe_grid, probe_headline, probe_causes, probe_summary, probe_example, probes_reading
from .graph_audit import (audit_runs, audit_scopes, show_pooled_audit, pooled_summary, violation_caveat, audit_reading,
                          show_violations, violation_causes, audit_headline)
from .gallery import failure_kinds, gallery_headline, gallery_reading

__all__ = [
    "TARGET", "BASELINE", "REFERENCE", "AGREES", "AGAINST", "NO_EFFECT", "UNDECIDED", "claim_status", "Reading",
    "glue_figure", "show_figure", "fill_command", "not_run", "trivial_phrase", "constant_phrase", "scale_phrase",
    "signed", "sentence", "p_value", "gain_clause", "per_seed_gains", "sample_phrases", "paper_numbers", "Headline",
    "first_screen", "label_gaps_note", "MIN_ROWS", "answer_causes", "pair_causes", "verdict", "paired_headline",
    "MAIN_CONDITIONS", "PRIMARY_SEED", "THREE_SEEDS", "main_summary_table", "budget_note", "answer_reading",
    "show_cost", "main_results", "omission_sentence", "paper_bin_key", "bin_gain_table", "bin_headline",
    "bin_gains_sentence", "stress_table", "stress_caveats", "counted_stress", "complexity", "complexity_gains",
    "show_bin_gains", "show_ood", "show_stress", "ABLATIONS", "ablation_table", "NO_OBJECT", "NOT_APPLIED", "ignored_by_backend",
    "not_applied", "ablation_phrase", "scale_table", "tool_choice_table", "ablations", "ablation_headline",
    "probe_grid", "probe_headline", "probe_causes", "probe_summary", "probe_example", "probes_reading", "audit_runs",
    "audit_scopes", "show_pooled_audit", "pooled_summary", "violation_caveat", "audit_reading", "show_violations",
    "violation_causes", "audit_headline", "failure_kinds", "gallery_headline", "gallery_reading",
]
