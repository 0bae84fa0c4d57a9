"""The local family: a GGUF model under llama-cpp-python on a CPU (:mod:`.backend`), with what serves only it:
the model files (:mod:`.models`), their loading (:mod:`.llama_loading`), the chat template
(:mod:`.chat_template`), the decoding loop (:mod:`.jump_forward`), the compiled regex constraints
(:mod:`.regex_indexes`) and the prompt states it keeps (:mod:`.kept_states`, on disk through
:mod:`.state_store`). Importing it imports no llama.cpp: the heavy libraries load when a backend is built.

``python -m cpdagthink.backends.local ...`` serves a model through ``llama_cpp.server`` (:func:`.backend.serve`).
"""

from .backend import LocalBackend

__all__ = ["LocalBackend"]
