"""``python -m cpdagthink.backends.local --model NAME ...``: ``llama_cpp.server`` as the local backend loads a model."""

from .backend import serve

if __name__ == "__main__":
    serve()
