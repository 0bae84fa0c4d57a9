"""One Corr2Cause row (:class:`Instance`): the premise, the hypothesis and their labels, as every layer sees it.

Reading rows from a CSV or the hub is :mod:`cpdagthink.run.data`'s job; this is only the typed row.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict


class Instance(BaseModel):
    """One Corr2Cause row."""

    model_config = ConfigDict(frozen=True)

    id: str
    premise: str
    hypothesis: str
    num_variables: int
    template: str
    label: int
    split: str
    source: str

    @property
    def text(self) -> str:
        """The row's ``input`` cell as the hub writes it."""
        return f"{self.premise}\nHypothesis: {self.hypothesis}"

    @property
    def content_sha256(self) -> str:
        """What the row says, independent of where it was read from: a changed premise, hypothesis, label,
        variable count or template changes it; a renamed file, another split name or row index does not."""
        content = [self.premise, self.hypothesis, self.label, self.num_variables, self.template]
        return hashlib.sha256(json.dumps(content).encode()).hexdigest()
