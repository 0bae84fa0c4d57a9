"""The one interface every backend implements: a :class:`~cpdagthink.method.chat.Request` in, a
:class:`~cpdagthink.method.chat.Completion` with usage and latency out (both plain data, defined with the method in
:mod:`cpdagthink.method.chat`), and the errors a backend raises.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

from ..errors import CpdagthinkError
from ..method.chat import Completion, Request

if TYPE_CHECKING:
    from .profiles import ListPrice, RecommendedSampling


class BackendError(CpdagthinkError, RuntimeError):
    """A backend could not serve a request (missing package, unreachable endpoint, bad model file)."""


class RequestRejected(BackendError):
    """This one request cannot be served as it is (too long for the context, refused as invalid by the
    server) while others can: the runner records it on its instance and goes on."""


class PartialBatchError(BackendError):
    """A batch stopped on an error after some of its requests were served. ``completions`` holds, in request
    order, each finished completion (None where a request failed or never started), so the caller can keep
    what was paid for before it stops; the message is the first error's."""

    def __init__(self, error: BaseException, completions: list["Completion | None"]):
        self.completions = completions
        super().__init__(str(error))


@dataclass(frozen=True)
class Provenance:
    """Where a backend's model came from, as a run's metadata records it (paper App. J). None: not known
    to this backend, or not applicable (e.g. the symbolic reference agent has no weights)."""

    model_revision: str | None = None  # the resolved commit hash, or ``sha256:...`` of a weights file
    tokenizer_revision: str | None = None  # the same for the tokenizer (a GGUF file carries its own)
    model_package: str | None = None  # the pip package a local model file was installed from, ``name==version``
    api: str | None = None  # the API a service was called through, and where
    served_weights: str | None = None  # the weights a server says stand behind the model's name (vLLM's root)


class Backend(ABC):
    """A model behind one interface. ``identity()`` names the exact model (and revision or sha256).

    Capabilities are typed attributes, so the runner never reads them out of ``identity()``:
    ``thinking_supported`` (False: the runner sends ``thinking=False`` so one request is one cache entry),
    ``preferred_chunk_size`` (instances per batched call when a run does not choose one), ``streams_requests``
    (True: it serves one request at a time over the network, so the runner sends each instance's turns on its
    own as soon as the turn before arrives, up to ``max_concurrency`` requests in flight across every run on it;
    False: whole batches, as an offline engine computes them), ``gathers_runs`` (True: a call of
    :meth:`complete_batch` costs a wait, not a slot, so runs made together send each turn's requests together, as
    one call: batch files), and ``fail_on_error`` (for a streaming backend: the share of its last requests whose
    failing every attempt stops a run as a broken service; None: never).

    What the run configuration, the book and the workflow must know of a family before anything is built
    is answered by the class, so no module outside ``backends/`` switches on a backend's name: ``sized_by``
    and ``api_slots`` (:meth:`job_resources`), :meth:`model_title`, :meth:`recommended_sampling`,
    :meth:`sends_sampling`, :meth:`check_condition` and :meth:`list_price`. They are read through the registry
    (:func:`cpdagthink.backends.backend_class`), so they must import no heavy library (the model's own one
    is imported when the backend is built).
    """

    name: str = "backend"
    thinking_supported: bool = False
    preferred_chunk_size: int = 1
    streams_requests: bool = False
    gathers_runs: bool = False
    max_concurrency: int = 1
    fail_on_error: float | None = None
    # (the scheduler resource a job of this backend holds, the option of this class that sizes it), e.g.
    # ("threads", "n_threads"); None: a job holds one thread.
    sized_by: ClassVar[tuple[str, str] | None] = None
    api_slots: ClassVar[int] = 0  # a job's share of the profile's ``api_slots`` (1 for a service called over HTTP)
    offers_batches: ClassVar[bool] = False  # takes ``batch=true``: a run's calls as batch files, at the batch price
    # Building it loads no model and calls nothing, so a plan may build it to learn its identity (the cost estimate).
    builds_cheaply: ClassVar[bool] = False
    symbolic: ClassVar[bool] = False  # answers without a language model: no tokens to price

    @classmethod
    def calls_in_flight(cls, options: Mapping[str, Any]) -> int:
        """How many calls a run keeps in flight with ``options``: its ``max_concurrency`` as given or as this
        class's default; 1 for a backend that takes no such option."""
        parameter = inspect.signature(cls).parameters.get("max_concurrency")
        return int(options.get("max_concurrency", parameter.default if parameter is not None else 1))

    @classmethod
    def job_resources(cls, options: Mapping[str, Any]) -> dict[str, int]:
        """The scheduler resources one job of this backend holds with ``options`` (its ``sized_by`` option as
        given, or as this class's default)."""
        resources = {"api_slots": cls.api_slots} if cls.api_slots else {}
        if cls.sized_by:
            resource, option = cls.sized_by
            resources[resource] = int(options.get(option, inspect.signature(cls).parameters[option].default))
        return resources

    @classmethod
    def model_title(cls, model: str | None) -> str:
        """The model a run of this backend runs, by its resolved name as a page names it (never ``default``)."""
        return str(model)

    @classmethod
    def recommended_sampling(cls, model: str | None, thinking: bool) -> RecommendedSampling | None:
        """The publisher's recommended sampling for ``model`` in the thinking (or non-thinking) mode; None
        where this family records none."""
        return None

    @classmethod
    def sends_sampling(cls, model: str | None) -> bool:
        """False where the service takes no sampling parameters for ``model`` and applies its own
        (temperature 1, top_p 1: the OpenAI reasoning models)."""
        return True

    @classmethod
    def check_condition(cls, model: str | None, thinking: bool, options: Mapping[str, Any]) -> None:
        """Refuse early (a ``ValueError``) a run this family cannot serve: ``thinking`` off where ``model``
        cannot switch reasoning off, an option its model family does not take. Nothing by default."""

    @classmethod
    def list_price(cls, model: str | None, options: Mapping[str, Any]) -> ListPrice | None:
        """The list price of a run of ``model`` with ``options`` (:class:`~.profiles.ListPrice`): where it calls
        a publisher's service whose price the model's profile records. None by default: a model this project
        serves itself (vLLM, llama.cpp, a server of one's own) costs its machine's time, not a token price."""
        return None

    tools: ClassVar[bool] = True  # a class-level answer: the backend passes tools and tool messages (chapter 07's design)

    @classmethod
    def applies_regex(cls, options: Mapping[str, Any]) -> bool:
        """A class-level answer, read without building the backend: whether a request's regex constraint is
        applied to decoding under these options (a design point that needs it is refused where it is not)."""
        return True

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What computes: backend, model, revision or file hash, build, decoder and profile, the fixed settings
        that make two calls comparable (the cache key's backend part). Never how the model is reached (a URL, a
        timeout, a key): a service is named by the model it serves, not by its address."""

    def provenance(self) -> Provenance:
        """The model's resolved revisions and the API used, for run metadata (never part of the cache key)."""
        return Provenance()

    @abstractmethod
    def complete(self, request: Request) -> Completion:
        """Serve one request."""

    def complete_or_rejected(self, request: Request) -> Completion:
        """One request; one the service refuses comes back as a completion carrying why (``meta["rejected"]``)
        instead of raising :class:`RequestRejected`."""
        try:
            return self.complete(request)
        except RequestRejected as error:
            return Completion(text="", meta={"rejected": str(error)})

    def complete_batch(self, requests: Sequence[Request]) -> list[Completion]:
        """Serve many requests; backends with real batching (vLLM, concurrent APIs) override this."""
        return [self.complete(r) for r in requests]

    def attach_run(self, folder: Path) -> None:
        """The run about to be made keeps its files in ``folder``: a backend with state of its own that must
        outlive a session (the batches it submitted and waits for) keeps it there. No-op by default."""

    def attach_runs(self, asked: Mapping[Path, Sequence[Request]]) -> None:
        """The next :meth:`complete_batch` serves several runs at once (``gathers_runs``): each run's folder with
        the requests it asked, so state of the backend's own is kept in the folder of each run it concerns.
        No-op by default."""

    def close(self) -> None:
        """Release the model or connections (no-op by default)."""


def read_options(factory: Callable[..., Any], name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` read against ``factory``'s parameter annotations (for a class, its ``__init__``'s), so each
    option's type and range is declared once, where the backend takes it (``Annotated[int, Field(ge=1,
    le=64)]``): a value an annotation refuses raises ``ValueError`` naming backend ``name``, the option and the
    annotation's reason, never the value (it may be a URL). Values are returned as read (``"30"`` for a float
    is 30.0); an option without an annotation pydantic can check is returned as given."""
    hints = _annotations(factory)
    return {key: _read(name, key, hints[key], value) if key in hints else value for key, value in options.items()}


def _annotations(factory: Callable[..., Any]) -> dict[str, Any]:
    """The factory's parameter annotations, evaluated with their constraints (``Annotated`` kept); none where
    one cannot be (a name only a type checker sees): the backend then checks its values itself."""
    import typing

    try:
        return typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory, include_extras=True)
    except Exception:  # noqa: BLE001 - NameError, TypeError of an annotation this Python cannot evaluate
        return {}


def _read(backend: str, key: str, annotation: Any, value: Any) -> Any:
    from pydantic import ConfigDict, TypeAdapter, ValidationError

    try:
        adapter = TypeAdapter(annotation, config=ConfigDict(coerce_numbers_to_str=True, hide_input_in_errors=True))
    except Exception:  # noqa: BLE001 - an annotation pydantic cannot check (an arbitrary class)
        return value
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        raise ValueError(f"backend {backend!r} option {key}: {_reason(error)}") from None


def _reason(error: Any) -> str:
    """The first reason pydantic gives, without its ``Value error, `` prefix (a validator's own message)."""
    message = error.errors(include_url=False, include_input=False)[0]["msg"]
    return message.removeprefix("Value error, ")
