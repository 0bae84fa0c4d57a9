"""The paper's method: the ``CausalAnalysis`` object and its decoding regex (``schema``), the chat request a
condition builds and the completion it reads (``chat``), the decoding settings (``decoding``) and the named token budgets
(``budgets``), the prompts, the conditions as points of a design of the method's components (``design``, with the
neutral field names of ``field_names``), the turn-2 probes and their registry ``PROBES`` (``interventions``), and the certified CPDAG
validator (``validate``).

Its modules import from ``causal`` and the top-level modules, never from a layer above
(``tests/test_layers.py``). Each is imported by its own name (``from cpdagthink.method import chat``): importing
the folder imports none of them.
"""

__all__ = [
    "budgets",
    "chat",
    "conditions",
    "decoding",
    "design",
    "field_names",
    "interventions",
    "prompts",
    "schema",
    "validate",
]
