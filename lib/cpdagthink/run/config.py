"""Run configurations: what the command line, the notebooks and ``book`` all build, validate once, and
derive the run folder, the instances and the backend from.

A :class:`RunSet` names a set of runs: one condition (and optional probe) on one sample, at one or more
decoding seeds. Each seed is one :class:`RunConfig` (:meth:`RunSet.for_run`): one run, one folder, whose
``config.json`` holds it, so a folder can always say exactly what produced it. What the run *is* (its
identity, folder and plan group) is its :class:`~cpdagthink.run.spec.RunSpec`; the rest (base URLs, timeouts,
the chunk size, the folders) is how it is reached and kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, Sequence

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    field_validator,
    model_validator,
)

from ..causal.instance import Instance
from ..credentials import is_secret_query_key, strip_credentials
from ..method.budgets import DEFAULT as DEFAULT_BUDGETS
from ..method.decoding import Decoding, Sampling
from ..paths import OUTPUTS_ROOT
from .budget import BUDGET_OPTIONS, Budget
from .parameters import coerce_list, coerce_options
from .spec import RunSpec, Sample, computed_options

if TYPE_CHECKING:
    from ..backends import Backend


def _distinct_seeds(seeds: Sequence[int]) -> Sequence[int]:
    """Each seed is one run: a repeated seed would be the same run twice."""
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ValueError(f"seeds repeat: {list(seeds)} names {', '.join(map(str, repeated))} more than once; "
                         "give each seed once")
    return seeds


def bare_urls(urls: str | list[str]) -> str | list[str]:
    """A URL or a list of URLs without user info (:func:`cpdagthink.credentials.strip_credentials`): what may be stored,
    printed or passed on."""
    if isinstance(urls, str):
        return strip_credentials(urls)
    return [strip_credentials(u) for u in urls]


_Seeds = AfterValidator(_distinct_seeds)


class _Choices(BaseModel):
    """The choices a run and a set of runs share, validated once, at whichever front door built them."""

    # an error never quotes the input: a URL refused for the key it holds would print the key
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    condition: str = "structured"
    probe: str | None = None  # a turn-2 probe (§6) applied to the condition's object
    backend: str = "local"
    model: str | None = None
    backend_options: dict[str, Any] = Field(default_factory=dict)  # base_url, regex_mode, timeout, ...
    split: str = "test"
    data: str | None = None  # a Corr2Cause-format CSV instead of a split
    limit: NonNegativeInt = 0  # seeded label-stratified sample size; 0: every row
    sample_seed: int = 0
    sample_variables: tuple[PositiveInt, ...] | None = None  # draw the sample from rows with these counts
    sample_min_positives: NonNegativeInt = 1  # at least this many gold positives in the sample
    decoding: Decoding = Field(default_factory=Decoding)
    chunk_size: PositiveInt | None = None  # instances per batched call; None: the backend's preference
    out_root: str = Field(default_factory=lambda: str(OUTPUTS_ROOT / "runs"))
    cache_dir: str = Field(default_factory=lambda: str(OUTPUTS_ROOT / "cache"))

    @field_validator("backend_options")
    @classmethod
    def _no_credentials(cls, options: dict[str, Any]) -> dict[str, Any]:
        return {**options, "base_url": bare_urls(options["base_url"])} if options.get("base_url") else options

    @model_validator(mode="after")
    def _check(self) -> Self:
        from ..method.conditions import CONDITIONS

        if self.condition not in CONDITIONS:
            raise ValueError(f"unknown condition {self.condition!r}; choose one of {', '.join(CONDITIONS)}")
        if self.probe is not None:
            from ..method.interventions import PROBES

            if self.probe not in PROBES:
                raise ValueError(f"unknown probe {self.probe!r}; choose one of {', '.join(PROBES)}")
            from ..method.conditions import Flow

            if CONDITIONS[self.condition].flow is not Flow.TOOL:
                raise ValueError(f"probe {self.probe!r} replaces a tool call's object; {self.condition!r} makes none")
            if CONDITIONS[self.condition].repair:
                raise ValueError(f"probe {self.probe!r} and {self.condition!r}'s repair round would both replace the "
                                 "object turn 2 shows: run the probe on a condition without one")
        from ..backends import BACKENDS, backend_class, check_options

        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; choose one of {', '.join(sorted(BACKENDS))}")
        # a flag the backend does not take fails here, and so does a model it needs and was not given
        check_options(self.backend, self.backend_arguments(), whole=True)
        self.budget()  # a budget is the runner's, for every backend alike
        backend_class(self.backend).check_condition(self.model, self.thinks(), self.backend_options)
        return self

    def budget(self) -> Budget:
        """The run's spending limit and prices (:class:`~.budget.Budget`): as given, a limit without prices
        counted at the model's list price where it has one."""
        from ..backends import backend_class

        return Budget.of(self.backend_options, backend_class(self.backend).list_price(self.model, self.backend_options))

    def thinks(self, condition: str | None = None) -> bool:
        """Whether the requests of ``condition`` (this one's own by default) ask the model to think."""
        from ..method.conditions import CONDITIONS

        return CONDITIONS[condition or self.condition].thinking and self.decoding.thinking

    @property
    def label(self) -> str:
        return f"{self.backend}:{self.model or 'default'}"

    @property
    def sample(self) -> Sample:
        """The rows every run of these choices reads."""
        return Sample(**{name: getattr(self, name) for name in Sample.model_fields})  # the same names

    @property
    def source(self) -> str:
        return self.sample.source

    def all_instances(self) -> list[Instance]:
        """Every row of the CSV or split (:meth:`Sample.all_instances`)."""
        return self.sample.all_instances()

    def instances(self) -> list[Instance]:
        """The sample every run of these choices uses (:meth:`Sample.instances`)."""
        return self.sample.instances()

    def backend_arguments(self) -> dict[str, Any]:
        """Keyword options for :func:`backends.make_backend` (the model and the backend's own options, without the
        runner's budget: :mod:`.budget`)."""
        own = {k: v for k, v in self.backend_options.items() if k not in BUDGET_OPTIONS}
        return {**({"model": self.model} if self.model else {}), **own}


class RunConfig(_Choices):
    """One run: its :class:`~cpdagthink.run.spec.RunSpec` (:attr:`spec`, what it is) and how it is reached and
    kept (transport options, chunk size, folders). A run folder's ``config.json`` holds one."""

    @model_validator(mode="before")
    @classmethod
    def _one_seed(cls, data: Any) -> Any:
        """A ``config.json`` written when a run's config was a set of one seed (``seeds: [s]``) reads as that run:
        its seed is its decoding's."""
        if isinstance(data, dict) and "seeds" in data:
            data = dict(data)
            seeds = list(data.pop("seeds"))
            decoding = data.get("decoding")
            seed = decoding.seed if isinstance(decoding, Decoding) else (decoding or {}).get("seed", 0)
            if seeds != [seed]:
                raise ValueError(f"a run has one seed, its decoding's ({seed}); this names {seeds}: "
                                 "make a RunSet for several")
        return data

    @property
    def seed(self) -> int:
        return self.decoding.seed

    @property
    def spec(self) -> RunSpec:
        """What this run is; everything that decides whether two runs are the same is derived from it."""
        return RunSpec(condition=self.condition, probe=self.probe, backend=self.backend, model=self.model,
                       options=computed_options(self.backend_options), decoding=self.decoding, sample=self.sample)

    def folder(self, instances: list[Instance]) -> Path:
        """The run folder under ``out_root``, named by the spec (:meth:`RunSpec.folder_name`)."""
        return Path(self.out_root) / self.spec.folder_name(instances)


class RunSet(_Choices):
    """A set of runs: the choices of one run at one or more decoding seeds, each seed one run (and one folder).
    What ``--seeds`` and a chapter's ``setup`` ask for; :meth:`for_run` makes each :class:`RunConfig`."""

    seeds: Annotated[tuple[int, ...], _Seeds] = Field((0,), min_length=1)  # decoding seeds, one run folder each

    @model_validator(mode="after")
    def _seeds_differ(self) -> "RunSet":
        if len(self.seeds) > 1 and self.decoding.greedy:
            raise ValueError(
                f"{len(self.seeds)} seeds under greedy decoding (temperature 0) would be copies of one output; "
                "set a temperature (--temperature, or the model's recommended sampling with --sampling "
                "recommended) or ask for one seed")
        return self

    def for_run(self, condition: str | None = None, seed: int | None = None, probe: str | None = None) -> RunConfig:
        """The run of ``condition`` (the set's own by default) at ``seed`` (the first by default) under ``probe``."""
        seed = self.seeds[0] if seed is None else seed
        condition = condition or self.condition
        update = {"condition": condition, "probe": probe,
                  "decoding": self._mode_decoding(condition).model_copy(update={"seed": seed})}
        return RunConfig.model_validate({**self.model_dump(exclude={"seeds"}), **update})

    def _mode_decoding(self, condition: str) -> Decoding:
        """The decoding of ``condition``: where it runs in the other thinking mode than this set's condition
        and this set samples at the publisher's recommendation for its own mode, the recommendation for
        the other mode (e.g. Qwen3.5's 0.7/0.8/20 for ``no_thinking`` beside 1.0/0.95/20 for ``structured``);
        any other sampling (chosen, greedy, or a model with one recommendation) is kept as it is."""
        own, other = self.thinks(), self.thinks(condition)
        if own == other:
            return self.decoding
        mine = recommended_sampling(self.backend, self.model, own)
        theirs = recommended_sampling(self.backend, self.model, other)
        current = Sampling(**{k: getattr(self.decoding, k) for k in Sampling.model_fields})
        if mine is None or theirs is None or current != mine:
            return self.decoding
        return self.decoding.model_copy(update=theirs.model_dump())


_Listed = BeforeValidator(coerce_list)  # papermill and shells deliver lists as text


_SECRET_SUFFIXES = ("_key", "_token", "_secret", "_password")  # hf_token, api_key: names of credentials


class BackendOptions(BaseModel):
    """A backend's own options (``-o KEY=VALUE``, a notebook's ``backend_options``), any the backend takes: its
    signature names them and reads each value (:func:`cpdagthink.backends.check_options`). The ones declared
    here are the ones that must be handled before any backend reads them: secrets stay out (an endpoint's user
    info moves to the environment, the key variable is a name). Each option's type and range is declared once,
    in the backend's own signature."""

    model_config = ConfigDict(extra="allow", hide_input_in_errors=True)

    base_url: Annotated[list[str], _Listed, AfterValidator(bare_urls)] | None = None  # user info: environment only
    # the variable whose key the endpoints get (a name, never the key: a value with '-' or '.' is refused)
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)

    @model_validator(mode="after")
    def _no_secrets(self) -> "BackendOptions":
        """Options are stored (``config.json``, executed notebooks) and printed: a key is never one of them."""
        secret = sorted(k for k in self.model_extra or {} if is_secret_query_key(k) or k.endswith(_SECRET_SUFFIXES))
        if secret:
            raise ValueError(f"{', '.join(secret)}: a credential is never a backend option (options are stored and "
                             "printed); give the key in an environment variable (api_key_env names it)")
        return self

    def given(self) -> dict[str, Any]:
        """The options given, as the backend takes them (one endpoint as a URL, several as a list)."""
        options = self.model_dump(exclude_unset=True)
        if isinstance(options.get("base_url"), list) and len(options["base_url"]) == 1:
            options["base_url"] = options["base_url"][0]
        return options


def _as_options(value: Any) -> Any:
    """``backend_options`` as given: options already read, or anything :func:`coerce_options` reads."""
    return value if isinstance(value, BackendOptions) else coerce_options(value)


class RunParameters(BaseModel):
    """The flat parameters of every front door (``cpdagthink run``/``book`` flags, a notebook's parameters
    cell), validated up front with messages that name the parameter; the backend's own options in one dict,
    ``backend_options``. :meth:`to_config` makes the :class:`RunSet`."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # as RunConfig's

    condition: str = "structured"
    probe: str | None = None
    backend: str = "local"
    model: str | None = None
    backend_options: Annotated[BackendOptions, BeforeValidator(_as_options)] = Field(
        default_factory=BackendOptions)
    split: str = "test"
    data: str | None = None
    limit: NonNegativeInt = 0
    sample_seed: int = 0
    sample_variables: Annotated[list[PositiveInt] | None, _Listed] = None
    sample_min_positives: NonNegativeInt = 1
    seeds: Annotated[list[int], _Listed, _Seeds] = Field(default_factory=lambda: [0], min_length=1)
    tool_choice: Literal["auto", "forced"] = "auto"
    max_tokens_turn1: PositiveInt = DEFAULT_BUDGETS.turn1
    max_tokens_answer: PositiveInt = DEFAULT_BUDGETS.answer
    thinking: bool = True
    sampling: Literal["auto", "greedy", "recommended"] = "auto"
    temperature: float | None = Field(None, ge=0.0, le=5.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: NonNegativeInt | None = None
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    chunk_size: PositiveInt | None = None
    out_root: str | None = None
    cache_dir: str | None = None

    @field_validator("model", "data", "probe", "out_root", "cache_dir", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @model_validator(mode="after")
    def _backend_takes_its_options(self) -> "RunParameters":
        self.options()  # a bad option fails where the parameters are made, whichever front door made them
        return self

    def options(self) -> dict[str, Any]:
        """The backend options given, read against the backend's own signature
        (:func:`cpdagthink.backends.check_options`; an unknown backend is refused by :class:`RunConfig`, with
        the choices)."""
        from ..backends import BACKENDS, check_options

        given = self.backend_options.given()
        budget = {k: given.pop(k) for k in BUDGET_OPTIONS & set(given)}  # the runner's, read here for every backend
        read = Budget.of(budget).model_dump(include=set(budget))
        return {**(check_options(self.backend, given) if self.backend in BACKENDS else given), **read}

    def sampling_settings(self) -> Sampling:
        """The model's recommended sampling (``auto``, whatever the number of seeds, so that a single seed's run
        is seed 0 of several seeds' runs: the primary run of the paper's primary-seed table); greedy only when
        asked for (``greedy``), or for one seed of a model with no known recommendation. Explicit values win.
        A service that takes no sampling parameters is recorded with the sampling it applies itself."""
        explicit = {k: getattr(self, k) for k in Sampling.model_fields if getattr(self, k) is not None}
        fixed = service_sampling(self.backend, self.model)
        if fixed is not None:
            if any(explicit[k] != getattr(fixed, k) for k in explicit):
                raise ValueError(f"{self.model} takes no sampling parameters (it always samples at temperature 1); "
                                 "leave --temperature/--top-p unset for it")
            return fixed
        if self.sampling == "greedy":
            return Sampling().model_copy(update=explicit)
        from ..method.conditions import CONDITIONS

        condition = CONDITIONS.get(self.condition)  # an unknown name is refused by RunConfig, with the choices
        thinking = self.thinking and (condition is None or condition.thinking)
        found = recommended_sampling(self.backend, self.model, thinking)
        needs_one = self.sampling == "recommended" or len(self.seeds) > 1
        if found is None and needs_one and self.temperature is None:
            raise ValueError(
                f"no recommended sampling is known for {self.backend}:{self.model or 'default'}; "
                "set --temperature (and --top-p/--top-k/--min-p) for a run with several seeds")
        return (found or Sampling()).model_copy(update=explicit)

    def to_config(self) -> RunSet:
        decoding = Decoding(tool_choice=self.tool_choice, max_tokens_turn1=self.max_tokens_turn1,
                            max_tokens_answer=self.max_tokens_answer, thinking=self.thinking, seed=self.seeds[0],
                            **self.sampling_settings().model_dump())
        folders = {k: getattr(self, k) for k in ("out_root", "cache_dir") if getattr(self, k)}
        return RunSet(condition=self.condition, probe=self.probe, backend=self.backend, model=self.model,
                      backend_options=self.options(), split=self.split, data=self.data, limit=self.limit,
                         sample_seed=self.sample_seed, sample_min_positives=self.sample_min_positives,
                         sample_variables=tuple(self.sample_variables) if self.sample_variables else None,
                         seeds=tuple(self.seeds), decoding=decoding, chunk_size=self.chunk_size, **folders)


def recommended_sampling(backend: str, model: str | None, thinking: bool = True) -> Sampling | None:
    """The publisher's recommended sampling for a model, where its backend's family records it (the local
    registry, the model profiles; their ``source`` says where it was read); None where nothing is recorded."""
    found = _family(backend).recommended_sampling(model, thinking)
    return None if found is None else Sampling(**{k: getattr(found, k) for k in Sampling.model_fields})


def service_sampling(backend: str, model: str | None) -> Sampling | None:
    """For a model whose service takes no sampling parameters (OpenAI reasoning models), the sampling it
    applies itself: temperature 1, top_p 1. None where sampling parameters are sent."""
    return None if _family(backend).sends_sampling(model) else Sampling(temperature=1.0)


def _family(backend: str) -> type[Backend]:
    """The class that answers for ``backend``'s family; the base class's defaults for a name no entry of
    ``BACKENDS`` has (:class:`RunConfig` refuses it, with the choices)."""
    from ..backends import BACKENDS, Backend, backend_class

    return backend_class(backend) if backend in BACKENDS else Backend
