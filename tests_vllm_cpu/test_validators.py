"""mistral_common (what vLLM's Mistral tokenizers validate with) accepts the turn 2 this project builds: the
tool-call id was ``call_0`` and every Mistral turn 2 was refused. No engine is started."""

from __future__ import annotations

import pytest
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.validator import (MistralRequestValidatorV3, MistralRequestValidatorV5,
                                                        MistralRequestValidatorV11, ValidationMode)

from cpdagthink.backends.toolcalls import chat_messages
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.method.chat import Completion, ToolCall
from cpdagthink.method.conditions import CONDITIONS, second_request
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.schema import TOOL_NAME, CausalAnalysis


@pytest.mark.parametrize("validator", [MistralRequestValidatorV3, MistralRequestValidatorV5, MistralRequestValidatorV11])
def test_mistral_validators_accept_turn2(rows, validator):
    for row in rows:
        emitted = CausalAnalysis.from_cpdag(analyse_premise(row.premise).cpdag)
        turn1 = Completion(text="", tool_calls=[ToolCall(TOOL_NAME, emitted.model_dump_json())])
        request = second_request(CONDITIONS["structured"], row, Decoding(), turn1)
        messages = ChatCompletionRequest.from_openai(chat_messages(request.messages), tools=list(request.tools)).messages
        validator(ValidationMode.serving).validate_messages(messages)
