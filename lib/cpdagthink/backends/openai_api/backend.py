"""OpenAI-compatible APIs: chat completions (the OpenAI API, a vLLM server, ``llama_cpp.server``) and the
OpenAI Responses API (reasoning models), as one backend over five parts:

* :mod:`.payloads` builds each request's payload from the model profile (:mod:`..profiles`): which API
  (``responses`` for the GPT-5 family and the o-series, chat completions for everything else; the ``api``
  option overrides), the token and sampling parameters, the reasoning control, tools and constraints;
  ``meta["api"]`` says which API served.
* :mod:`.responses` reads each answer into a :class:`Completion` and caps what is stored
  (``max_stored_chars`` per field).
* :mod:`.endpoints` gives each endpoint its own key and keeps keys out of every record.
* :mod:`.wire` sends each payload as the client's typed ``create`` would, through the client's own ``post``,
  without the client's per-call transform of the payload (the CPU that bounds a run of many calls in flight).
* :mod:`..transport` sends the attempts: round-robin over ``base_url``, at most ``max_concurrency`` in flight,
  each attempt within ``timeout``, retried as :meth:`OpenAIBackend.classify` says: timeouts, 408/409/425/429/5xx,
  connection errors and an HTTP 200 whose body is not a well-formed answer are retried ``retries`` times (a call
  that hangs once in a hundred costs its instance a retry, never the run); a refused key and a spent quota are
  fatal, as no retry mends them.

The backend serves one request at a time (:attr:`~..base.Backend.streams_requests`): the runner sends each
instance's turns on their own, up to ``max_concurrency`` in flight across every run on the backend, and stops a
run as a broken service when a share ``fail_on_error`` of its last requests failed every attempt.

A request the service rejects (400/413/422) comes back from :meth:`OpenAIBackend.complete_batch` as a
rejected completion carrying the service's own message (``meta["rejected"]``); :meth:`OpenAIBackend.complete`
raises :class:`ServiceRejected` instead. Carried reasoning items the service cannot verify are dropped and the
turn resent (:meth:`OpenAIBackend.complete`). A batch that stops on an error still hands back every
completion that finished (:class:`PartialBatchError`).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Mapping, Sequence
from urllib.parse import urlsplit

from pydantic import Field

from ...method.chat import Completion, Request
from ...paths import OUTPUTS_ROOT
from ..base import Backend, BackendError, PartialBatchError, Provenance, read_options
from .batch_state import STATE_FOLDER, BatchState
from .batches import BatchRounds, BatchStopped, OpenAIBatches, Refused
from .endpoints import (NO_KEY, OPENAI_HOST, Endpoints, endpoint_keys, endpoint_urls, public_url, public_url_for_client,
                        redact)
from .payloads import RegexMode, carries_reasoning, chat_kwargs, responses_kwargs, without_reasoning_items
from .served import endpoints_weights
from .responses import (
    MAX_STORED_CHARS,
    MalformedAnswer,
    cap_stored,
    checked,
    completion_from_response,
    completion_from_responses,
    typed,
)
from ..profiles import (ListPrice, ModelProfile, ProfiledFamily, check_effort, list_price, profile_for,
                        with_overrides)
from ..transport import MESSAGE_CHARS, Failure, ServiceRejected, Transport, bounded_http_client, status_failure
from .run_batch import VLLMRunBatch, run_batch_gpus
from .wire import Call, call_for, prepare

INSTALL_HINT = "pip install -e '.[api]'"
# Seconds one attempt may take when no ``timeout`` is given: a reasoning model at a paper-scale budget
# legitimately takes minutes; anything else that is silent for a minute is treated as dead.
TIMEOUT_REASONING_S = 600.0
TIMEOUT_CHAT_S = 60.0
# The ranges of the settings (each declared once, in the signature's annotations): a run against a failing
# server waits at most retries x backoff, and says so while it waits (:mod:`..transport`).
MAX_CONCURRENCY = 256
MAX_RETRIES = 10
MAX_BACKOFF_S = 120.0
MAX_TIMEOUT_S = 3600.0
# A run stops as a broken service when this share of its last requests failed every attempt.
FAIL_ON_ERROR = 0.5
# The error codes of a key refused and of a spent quota: no retry mends them.
_FATAL_CODES = {"insufficient_quota", "invalid_api_key", "billing_hard_limit_reached", "account_deactivated"}
# Characters of a service's error body kept as its message.
SERVER_MESSAGE_CHARS = 2000
# The address the (never used) clients get when ``vllm run-batch`` answers: no request goes over the network.
NO_SERVER = "http://127.0.0.1:9/v1"
# Instances per chunk in batch mode: the whole run, so each turn is one round of batch files.
WHOLE_RUN = 1 << 30
# The service's refusal of reasoning items it did not issue to this organisation.
_UNVERIFIABLE = re.compile(r"(?i)encrypted content .* could not be verified|invalid_encrypted_content")


def check_settings(**settings: Any) -> None:
    """Refuse, by name, a setting outside the range :class:`OpenAIBackend`'s signature declares (the same check
    :func:`cpdagthink.backends.check_options` makes before anything runs), for a backend built directly."""
    read_options(OpenAIBackend, OpenAIBackend.name, settings)


def backend_profile(model: str, regex_mode: str, *, token_param: str | None, thinking_param: str | None,
                    reasoning_parser: str | None, send_sampling: bool | None, api: str | None) -> ModelProfile:
    """The profile requests follow: the model's, with each option given over it. A vLLM server speaks chat
    completions, and switches an unknown model's thinking through its chat template."""
    if thinking_param is None and regex_mode == "vllm" and profile_for(model).thinking == "unknown":
        thinking_param = "chat_template_kwargs"
    profile = with_overrides(profile_for(model), token_param=token_param, reasoning_control=thinking_param,
                             reasoning_parser=reasoning_parser, sampling=send_sampling,
                             api=api or ("chat" if regex_mode == "vllm" else None))
    if profile.api == "responses" and regex_mode == "vllm":
        raise ValueError("regex_mode 'vllm' sends the regex through chat completions: use api 'chat' with it")
    return profile


def default_timeout(profile: ModelProfile) -> float:
    """Seconds one attempt may take when no ``timeout`` is given, by whether the family reasons."""
    return TIMEOUT_REASONING_S if profile.thinking in ("switchable", "always_on") else TIMEOUT_CHAT_S


def _retry_after(exc: Exception) -> float | None:
    """The seconds an HTTP error's ``Retry-After`` header asks for, if it holds a number."""
    try:
        header = exc.response.headers.get("retry-after")  # type: ignore[attr-defined]
        return float(header) if header is not None else None
    except (AttributeError, ValueError):
        return None


class OpenAIBackend(ProfiledFamily, Backend):
    """Chat completions or the Responses API over HTTP. ``base_url``: None (api.openai.com), one URL, or a
    list (round-robin).

    Options beyond the connection: ``api`` (``chat`` | ``responses``; default by profile),
    ``token_param`` (``max_tokens`` | ``max_completion_tokens``), ``thinking_param`` (``none`` |
    ``reasoning_effort`` | ``chat_template_kwargs``), ``reasoning_effort`` (sent on thinking requests),
    ``send_sampling`` (send temperature/top_p even where the profile says not to), ``timeout`` (seconds one
    attempt may take in all; default by profile: 600 for reasoning families, else 60), ``retries``,
    ``max_stored_chars`` (kept per field of an answer), ``fail_on_error`` (the share of a run's last requests
    failing every attempt that stops it; 0: never); ``revision`` and ``reasoning_parser`` record what the
    server was started with; ``api_key_env`` names the variable whose key is sent (:func:`.endpoints.key_variable`).

    ``batch``: send each turn's requests as batch files (:mod:`.batches`), polled every ``batch_poll_s``
    seconds; a run is then one chunk (every turn 1, then every turn 2) and never streams an instance's turns.
    ``run_batch`` (the command, ``vllm run-batch`` or ``vllm``; no ``base_url``) runs each file with ``vllm
    run-batch`` on this node instead (:mod:`.run_batch`), with ``run_batch_args`` (engine arguments) last.
    How requests travel, never what they compute: the identity and the cache keys are a direct call's (to ``vllm
    serve`` for ``run_batch``).
    """

    name = "openai"
    preferred_chunk_size = 64
    streams_requests = True
    builds_cheaply = True  # a client is made, nothing is called
    api_slots = 1  # a grid job holds one of the profile's api_slots, sending up to max_concurrency at a time
    offers_batches = True  # -o batch=true: the Batch API (:mod:`.batches`)

    @classmethod
    def job_resources(cls, options: Mapping[str, Any]) -> dict[str, int]:
        """One of the profile's ``api_slots``; with ``run_batch``, vLLM runs inside the job instead: the GPUs of
        its tensor-parallel size (``--tensor-parallel-size``/``-tp`` in ``run_batch_args``, else 1), no slot."""
        if not options.get("run_batch"):
            return super().job_resources(options)
        return {"gpu": run_batch_gpus(str(options.get("run_batch_args") or ""))}

    @classmethod
    def list_price(cls, model: str | None, options: Mapping[str, Any]) -> ListPrice | None:
        """The profile's list price of ``model`` where the run calls OpenAI's own service (no ``base_url``, or
        only ``api.openai.com``; no ``run_batch``); None for any other server, whose price is not OpenAI's."""
        urls = options.get("base_url")
        urls = [] if urls is None else [urls] if isinstance(urls, str) else list(urls)
        if not model or options.get("run_batch") or any(urlsplit(str(u)).hostname != OPENAI_HOST for u in urls):
            return None
        return list_price(model)

    @classmethod
    def applies_regex(cls, options: Mapping[str, Any]) -> bool:
        """A generic OpenAI-compatible server applies no regex; a vLLM server does, given it with
        ``regex_mode="vllm"`` (its ``structured_outputs``)."""
        return options.get("regex_mode") == "vllm"

    def __init__(
        self,
        model: str,
        base_url: Endpoints = None,
        *,
        api_key_env: str | None = None,
        max_concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 5,
        retries: Annotated[int, Field(ge=0, le=MAX_RETRIES)] = 4,
        timeout: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)] | None = None,
        backoff_base: Annotated[float, Field(ge=0, le=MAX_BACKOFF_S, allow_inf_nan=False)] = 1.0,
        backoff_max: Annotated[float, Field(ge=0, le=MAX_BACKOFF_S, allow_inf_nan=False)] = 30.0,
        jitter_seed: int = 0,
        regex_mode: RegexMode = "none",
        token_param: Literal["max_tokens", "max_completion_tokens"] | None = None,
        thinking_param: str | None = None,
        reasoning_effort: str | None = None,
        send_sampling: bool | None = None,
        reasoning_parser: str | None = None,
        revision: str | None = None,
        send_seed: bool = True,
        api: Literal["chat", "responses"] | None = None,
        max_stored_chars: Annotated[int, Field(ge=1)] = MAX_STORED_CHARS,
        fail_on_error: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = FAIL_ON_ERROR,
        batch: bool = False,
        batch_poll_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 30.0,
        run_batch: Annotated[str, Field(min_length=1)] | None = None,
        run_batch_args: str = "",
    ):
        openai = _openai_module()
        check_settings(max_concurrency=max_concurrency, retries=retries, timeout=timeout, backoff_base=backoff_base,
                       backoff_max=backoff_max, regex_mode=regex_mode, max_stored_chars=max_stored_chars,
                       fail_on_error=fail_on_error)
        self.model = model
        urls = _urls(base_url, run_batch)
        self.base_urls = [public_url(u) for u in urls]
        self.regex_mode = regex_mode
        self.profile = backend_profile(model, regex_mode, token_param=token_param, thinking_param=thinking_param,
                                       reasoning_parser=reasoning_parser, send_sampling=send_sampling, api=api)
        check_effort(self.profile, reasoning_effort)
        self.reasoning_effort = reasoning_effort
        # The switch changes what is sent only where the family has an off switch; elsewhere the runner
        # sends thinking=False so one request is one cache entry.
        self.thinking_supported = self.profile.off_switch is not None
        self.revision, self.api_key_env = revision, api_key_env
        keys = endpoint_keys(urls, api_key_env)
        self._secrets = tuple(k for k in keys if k)
        self.timeout = float(timeout) if timeout is not None else default_timeout(self.profile)
        self._clients = _clients(openai, urls, keys, self.timeout, self.profile.api, max(1, int(max_concurrency)))
        del keys
        self._openai = openai
        self.transport = Transport(self._clients, self.base_urls, self.classify, timeout=self.timeout,
                                   retries=int(retries), backoff_base=backoff_base, backoff_max=backoff_max,
                                   jitter_seed=jitter_seed, max_concurrency=max(1, int(max_concurrency)))
        self.max_concurrency = self.transport.max_concurrency
        self.fail_on_error = float(fail_on_error) or None
        self.send_seed, self.max_stored_chars = send_seed, int(max_stored_chars)
        self.served_model: str | None = None
        self.served_weights = None if run_batch else self._served_weights()  # run-batch has no server to ask
        self._batch_mode(bool(batch) or run_batch is not None, float(batch_poll_s), int(retries), run_batch,
                         run_batch_args)

    def _served_weights(self) -> str | None:
        """Asked once, before any request, so the identity never changes under a run: the weights the endpoints
        say stand behind the model's name (:mod:`.served`: vLLM's root, llama.cpp's model file), or None."""
        try:
            return endpoints_weights(self._clients, self.base_urls, self.model, self.timeout)
        except ValueError as mixed:
            raise BackendError(str(mixed)) from None

    def _batch_mode(self, batch: bool, poll_s: float, retries: int, run_batch: str | None, run_batch_args: str) -> None:
        """Set up batch mode (class docstring): the Batch API, or ``vllm run-batch`` where ``run_batch`` names the
        executable; its batches are written down under outputs/batches until a run names its folder
        (:meth:`attach_run`)."""
        self.batch = self.gathers_runs = batch  # runs made together share each turn's round of batch files
        if batch:
            # Batch mode works turn by turn over the whole run: one chunk, no instance's turn 2 sent on its own
            # (the streaming runner, which asks ``streams_requests``, must not take this backend).
            self.streams_requests = False
            if len(self.base_urls) > 1:
                raise ValueError("batch mode submits to one service: give one base_url")
            if not poll_s > 0:
                raise ValueError(f"batch_poll_s must be a positive number of seconds, got {poll_s!r}")
            self.preferred_chunk_size = WHOLE_RUN
        service = OpenAIBatches(self._batch_call, self.base_urls[0]) if run_batch is None else VLLMRunBatch(
            run_batch, self.model, revision=self.revision, reasoning_parser=self.profile.reasoning_parser,
            extra_args=shlex.split(run_batch_args))
        self.batches = BatchRounds(service, BatchState(OUTPUTS_ROOT / STATE_FOLDER), poll_s=poll_s, retries=retries)

    def provenance(self) -> Provenance:
        """The revision asked for (a service resolves its own: each response's ``model`` is recorded as the
        served snapshot) and the API with its public endpoints."""
        service = self.batches.service
        where = service.where if isinstance(service, VLLMRunBatch) else ", ".join(self.base_urls)
        api = "Responses API" if self.profile.api == "responses" else "Chat Completions API"
        through = " through batch files" if self.batch else ""
        return Provenance(model_revision=self.revision, api=f"OpenAI-compatible {api} at {where}{through}",
                          served_weights=self.served_weights)

    def attach_run(self, folder: Path) -> None:
        """Batch mode writes down its batches in the run folder (``batches/``), where a rerun finds them."""
        self.batches.state = BatchState(Path(folder) / STATE_FOLDER)

    def attach_runs(self, asked: Mapping[Path, Sequence[Request]]) -> None:
        """Batch mode, runs made together: each batch is written down in the folder of every run with a request
        in it (:meth:`.BatchState.shared`), so each run, collected again alone or with the others, finds it."""
        identity = self.identity()
        self.batches.state = BatchState.shared({Path(folder) / STATE_FOLDER: {r.cache_key(identity) for r in requests}
                                                for folder, requests in asked.items()})

    def identity(self) -> dict[str, Any]:
        """What computes: the model as requests name it to the server, the revision asked for, the API, regex mode,
        profile and effort. Never where it is reached: the endpoint that served each call is provenance, in the
        call's ``meta["base_url"]``, so replicas and aliases of one server are one model."""
        p = self.profile
        # The snapshot a server reports is recorded per call (Completion.meta["served_model"]), not here:
        # identity() keys the cache and must not change once responses arrive.
        return {
            "backend": "openai",
            "api": p.api,
            "model": self.model,
            "revision": self.revision,
            "regex_mode": self.regex_mode,
            "profile": {"family": p.family, "token_param": p.token_param, "sampling": p.sampling,
                        "reasoning_control": p.reasoning_control, "effort_off": p.effort_off,
                        "tool_envelope": p.tool_envelope, "reasoning_parser": p.reasoning_parser,
                        "strict_tools": p.strict_tools},
            "reasoning_effort": self.reasoning_effort,
            # The weights behind the name, only where the server names ones other than the model: a server
            # restarted on other weights under the same name is another model, while one that says nothing
            # new (OpenAI's API, a vLLM server of the hub id it loaded) keeps the key its cache was made under.
            **({"served_weights": self.served_weights} if self.served_weights not in (None, self.model) else {}),
        }

    @property
    def attempts(self) -> int:
        """HTTP attempts made so far (for tests and cost accounting)."""
        return self.transport.attempts

    def classify(self, exc: Exception, url: str) -> Failure | None:
        """What a failed attempt at ``url`` means (:mod:`..transport`): a timeout is retried, an HTTP error status
        counts by its code (a refused key or a spent quota is fatal, whatever its status), a connection error or
        an answer that is not well formed is retried; None for any other exception."""
        o = self._openai
        if isinstance(exc, o.APITimeoutError):
            return Failure("retry", f"{url} did not answer within {self.timeout:g} s (timeout; pass a larger "
                                    "timeout for slow models)")
        if isinstance(exc, o.APIStatusError) and getattr(exc, "code", None) in _FATAL_CODES:
            return Failure("fatal", f"request to {url} failed (HTTP {exc.status_code}, {exc.code}; no retry mends "
                                    f"it): {self._server_message(exc)}"[:MESSAGE_CHARS])
        if isinstance(exc, o.APIStatusError):
            return status_failure(url, exc.status_code, self._server_message(exc), _retry_after(exc))
        if isinstance(exc, o.APIConnectionError):
            return Failure("retry", f"{url}: {self._describe(exc)}")
        if isinstance(exc, (o.APIResponseValidationError, json.JSONDecodeError)):  # the body is not JSON at all
            return Failure("retry", self._malformed(url, exc))
        if isinstance(exc, MalformedAnswer):  # JSON of another shape
            return Failure("retry", self._malformed(url, exc.cause))
        return None

    def _server_message(self, exc: Any) -> str:
        body = getattr(exc, "body", None)
        if isinstance(body, dict) and body.get("message"):
            text = str(body["message"])
        elif body is not None:
            text = body if isinstance(body, str) else json.dumps(body)
        else:
            text = getattr(getattr(exc, "response", None), "text", "") or str(exc)
        return redact(text, self._secrets)[:SERVER_MESSAGE_CHARS]

    def _describe(self, exc: Exception) -> str:
        return redact(f"{type(exc).__name__}: {exc}", self._secrets)[:MESSAGE_CHARS]

    def _malformed(self, url: str, exc: Exception) -> str:
        """The server's fault, said as such: an HTTP 200 whose body is not an answer of this API."""
        return f"{url}: HTTP 200 but the body is not a well-formed answer ({self._describe(exc)})"[:MESSAGE_CHARS]

    def _call(self, request: Request) -> tuple[Call, Callable[..., Completion], dict[str, Any]]:
        """(the call, what reads its typed answer into a completion, note) for ``request`` on this backend's API.
        The call is what the client's typed ``create`` would send, without its per-call work (:mod:`.wire`)."""
        if self.profile.api == "responses":
            kwargs, note = responses_kwargs(request, self.model, profile=self.profile,
                                            reasoning_effort=self.reasoning_effort)
            return call_for("responses", kwargs), completion_from_responses, note
        kwargs, note = chat_kwargs(request, self.model, profile=self.profile, regex_mode=self.regex_mode,
                                   reasoning_effort=self.reasoning_effort, send_seed=self.send_seed)
        return call_for("chat", kwargs), completion_from_response, note

    def complete(self, request: Request) -> Completion:
        """One request; raises :class:`ServiceRejected` when the service refuses it as invalid. A request whose
        carried reasoning items the service cannot verify (made under another organisation's key, e.g. a cache
        replayed elsewhere) is sent once more without them; ``meta["reasoning_items_dropped"]`` gives the
        service's message, so the answer says it was made without the model's earlier reasoning."""
        try:
            return self._complete_once(request)
        except ServiceRejected as rejection:
            if not (_UNVERIFIABLE.search(rejection.server_message) and carries_reasoning(request)):
                raise
            refused = f"HTTP {rejection.status_code}: {rejection.server_message}"
        completion = self._complete_once(without_reasoning_items(request))
        completion.meta["reasoning_items_dropped"] = refused
        return completion

    def _complete_once(self, request: Request) -> Completion:
        call, parse, note = self._call(request)
        # the answer is read once the request has given its slot back (the transport's ``read``)
        read = checked(lambda response, latency_s, attempt: parse(call.read(response), latency_s, {**note, **attempt}))
        completion = self.transport.request(call.send, read)
        if completion.meta.get("served_model"):
            self.served_model = completion.meta["served_model"]
        return cap_stored(completion, self.max_stored_chars)

    def complete_or_rejected(self, request: Request) -> Completion:
        """One request; one the service refuses comes back carrying the service's message and status."""
        try:
            return self.complete(request)
        except ServiceRejected as rejection:
            return Completion(text="", meta={"rejected": f"HTTP {rejection.status_code}: {rejection.server_message}",
                                             "rejected_status": rejection.status_code, "base_url": rejection.url,
                                             "api": self.profile.api})

    def _batch_call(self, send: Callable[[Any], Any]) -> Any:
        """``send(client)`` of a Batch API call, retried and bounded as any request is."""
        return self.transport.request(send, lambda response, latency_s, attempt: response)

    def _body(self, request: Request) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(endpoint, the request's body as a batch line carries it, note): the direct call's keyword arguments,
        with what the client would merge into the body (``extra_body``) merged."""
        if self.profile.api == "responses":
            kwargs, note = responses_kwargs(request, self.model, profile=self.profile,
                                            reasoning_effort=self.reasoning_effort)
            endpoint = "/v1/responses"
        else:
            kwargs, note = chat_kwargs(request, self.model, profile=self.profile, regex_mode=self.regex_mode,
                                       reasoning_effort=self.reasoning_effort, send_seed=self.send_seed)
            endpoint = "/v1/chat/completions"
        extra = kwargs.pop("extra_body", None) or {}
        return endpoint, {**kwargs, **extra}, note

    def _read_line(self, body: Any, note: dict[str, Any], batch_id: str) -> Completion:
        """A batch output line's body read as the direct call's answer would be (:class:`MalformedAnswer` when
        it is not one); ``meta["batch"]`` names the batch that served it."""
        if self.profile.api == "responses":
            kind, parse = self._openai.types.responses.Response, completion_from_responses
        else:
            kind, parse = self._openai.types.chat.ChatCompletion, completion_from_response
        meta = {**note, "base_url": self.batches.service.where, "batch": batch_id}
        # as the client reads a direct answer: built without validation (a field a service leaves out stays None)
        completion = checked(lambda: parse(typed(kind, body), 0.0, meta))()
        if completion.meta.get("served_model"):
            self.served_model = completion.meta["served_model"]
        return cap_stored(completion, self.max_stored_chars)

    def _answered(self, answer: Completion | Refused | None) -> Completion | None:
        if not isinstance(answer, Refused):
            return answer
        return Completion(text="", meta={"rejected": answer.message, "rejected_status": answer.status_code,
                                         "base_url": self.batches.service.where, "api": self.profile.api,
                                         "batch": "not answered"})

    def _complete_in_batches(self, requests: Sequence[Request]) -> list[Completion]:
        """Batch mode's :meth:`complete_batch`: every request as a line of batch files, ``custom_id`` its cache
        key; answers in request order. A batch that failed or was cancelled raises :class:`PartialBatchError`
        with what came back; an interruption carries it as its ``completions``."""
        identity = self.identity()
        keys = [r.cache_key(identity) for r in requests]
        bodies, notes, endpoint = {}, {}, ""
        for key, request in zip(keys, requests):
            endpoint, bodies[key], notes[key] = self._body(request)
        try:
            answers = self.batches.run(bodies, endpoint, lambda cid, body, batch_id: self._read_line(
                body, notes[cid], batch_id))
        except BatchStopped as stopped:
            raise PartialBatchError(stopped, [self._answered(stopped.answers.get(k)) for k in keys]) from stopped
        except KeyboardInterrupt as stopped:
            stopped.completions = [self._answered(getattr(stopped, "answers", {}).get(k)) for k in keys]
            raise
        return [self._answered(answers[k]) for k in keys]

    def complete_batch(self, requests: Sequence[Request]) -> list[Completion]:
        """In batch mode, :meth:`_complete_in_batches`. Otherwise concurrent requests (at most ``max_concurrency``
        in flight), results in request order. A request
        the service rejects comes back with ``meta["rejected"]`` (the service's message), not raised. A
        request that fails stops the batch: :class:`PartialBatchError` carries every completion that finished;
        an interruption carries them as its ``completions``."""
        if self.batch:
            return self._complete_in_batches(requests)
        try:
            outcomes = self.transport.map(self.complete_or_rejected, requests)
        except KeyboardInterrupt as stopped:
            stopped.completions = [o if isinstance(o, Completion) else None for o in getattr(stopped, "outcomes", [])]
            raise
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures:
            raise PartialBatchError(failures[0], [o if isinstance(o, Completion) else None for o in outcomes]) \
                from failures[0]
        return outcomes

    def close(self) -> None:
        self.transport.close()


def _urls(base_url: Endpoints, run_batch: str | None) -> list[str | None]:
    """The endpoints the clients get: ``base_url``'s, or for ``vllm run-batch`` (which takes none) a placeholder
    no request goes to."""
    if run_batch is not None and base_url is not None:
        raise ValueError("run_batch runs vLLM on this node, not at a server: give no base_url with it")
    return endpoint_urls(base_url if run_batch is None else NO_SERVER)


def _openai_module() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise BackendError(f"the openai client is not installed; install with: {INSTALL_HINT}") from exc
    return openai


def _clients(openai: Any, urls: Sequence[str | None], keys: Sequence[str | None], timeout: float,
             api: str, connections: int) -> list[Any]:
    """One client per endpoint, holding that endpoint's key only and keeping ``connections`` open; the transport
    retries, not the client. Its API's types are read now (:func:`.wire.prepare`), not by a run's first calls."""
    prepare(api)
    return [openai.OpenAI(api_key=key or NO_KEY, base_url=None if u is None else public_url_for_client(u),
                          max_retries=0, timeout=timeout, http_client=bounded_http_client(timeout, connections))
            for u, key in zip(urls, keys)]
