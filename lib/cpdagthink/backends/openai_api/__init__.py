"""The OpenAI-compatible family: chat completions and the Responses API as one backend (:mod:`.backend`), over
its request payloads (:mod:`.payloads`), answer parsing (:mod:`.responses`) and endpoints with their keys
(:mod:`.endpoints`); the HTTP transport it sends through (:mod:`..transport`) stays at the top, for any API
family to reuse. Importing it imports no ``openai``: the client loads when a backend is built.
"""

from .backend import OpenAIBackend

__all__ = ["OpenAIBackend"]
