"""The one run configuration: validation at every front door, folders derived from it, seeds and sampling."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cpdagthink.method.decoding import Decoding
from cpdagthink.run.config import RunConfig, RunParameters, RunSet


@pytest.mark.parametrize("bad", [{"limit": -1}, {"limit": -5}, {"chunk_size": 0}, {"chunk_size": -2},
                                 {"max_tokens_turn1": 0}, {"max_tokens_answer": -5}, {"temperature": -0.1},
                                 {"top_p": 0}, {"sample_variables": [0]}, {"seeds": []}, {"tool_choice": "sometimes"},
                                 {"no_such_parameter": 1}, {"timeout": 5}, {"backend_options": "n_threads"}])
def test_bad_numbers_and_names_are_refused_up_front(bad):
    with pytest.raises(ValidationError):
        RunParameters(**bad)


@pytest.mark.parametrize("bad", [{"timeout": 0}, {"timeout": float("inf")}, {"timeout": float("nan")},
                                 {"timeout": "inf"}, {"retries": -1}, {"regex_mode": "sometimes"},
                                 {"max_concurrency": "many"}, {"no_such_option": 1}])
def test_bad_backend_options_are_refused_up_front_by_name(bad):
    with pytest.raises(ValidationError, match=next(iter(bad))):
        RunParameters(backend="openai", model="m", backend_options=bad)


def test_every_option_of_the_backend_is_taken_read_by_its_own_signature():
    """The options no flag names (vLLM's engine sizes, llama.cpp's threads, the API's concurrency) arrive in
    one dict, each value read as the backend's annotation reads it."""
    vllm = RunParameters(backend="vllm", model="Qwen/Qwen3-8B", backend_options={
        "tensor_parallel_size": 4, "max_model_len": "32768", "gpu_memory_utilization": 0.9}).to_config()
    assert vllm.backend_arguments() == {"model": "Qwen/Qwen3-8B", "tensor_parallel_size": 4, "max_model_len": 32768,
                                        "gpu_memory_utilization": 0.9}
    local = RunParameters(backend="local", backend_options={"n_threads": "8"}).to_config()
    assert local.backend_options == {"n_threads": 8}
    api = RunParameters(backend="openai", model="m", backend_options={"max_concurrency": 16, "revision": 1234})
    assert api.to_config().backend_options == {"max_concurrency": 16, "revision": "1234"}
    with pytest.raises(ValidationError, match="backend 'local' does not take max_concurrency; it takes: model, n_ctx"):
        RunParameters(backend="local", backend_options={"max_concurrency": 16})
    with pytest.raises(ValidationError, match="backend 'vllm' option max_model_len: Input should be a valid integer"):
        RunParameters(backend="vllm", model="m", backend_options={"max_model_len": "long"})


def test_unknown_condition_probe_and_backend_are_named():
    for field, value in (("condition", "nosuch"), ("probe", "nosuch"), ("backend", "nosuch")):
        with pytest.raises(ValidationError, match=f"unknown {field} 'nosuch'"):
            RunParameters(**{field: value}).to_config()


def test_several_seeds_under_greedy_decoding_are_refused():
    with pytest.raises(ValidationError, match="copies of one output"):
        RunParameters(backend="reference", seeds=[0, 1], sampling="greedy", temperature=0.0).to_config()
    with pytest.raises(ValidationError, match="copies of one output"):
        RunSet(seeds=(0, 1))
    sampled = RunParameters(backend="reference", seeds=[0, 1], temperature=0.7, top_p=0.8).to_config()
    assert sampled.decoding.temperature == 0.7 and sampled.decoding.top_p == 0.8 and sampled.seeds == (0, 1)
    assert RunParameters(backend="reference").to_config().decoding.greedy  # nothing to sample with: greedy


def test_list_parameters_arrive_as_text_from_papermill_and_shells():
    params = RunParameters(seeds="[0, 1]", sample_variables="[5, 6]", backend_options='{"base_url": "http://127.0.0.1:1/v1"}',
                           backend="openai", model="m", temperature=1.0)
    assert params.seeds == [0, 1] and params.sample_variables == [5, 6]
    assert params.backend_options.base_url == ["http://127.0.0.1:1/v1"]
    config = params.to_config()
    assert config.backend_options == {"base_url": "http://127.0.0.1:1/v1"} and config.sample_variables == (5, 6)
    words = RunParameters(backend="openai", model="m", backend_options="timeout=5 base_url=http://127.0.0.1:1/v1")
    assert words.to_config().backend_options == {"timeout": 5.0, "base_url": "http://127.0.0.1:1/v1"}


def test_a_run_folder_is_named_by_what_makes_the_run(test_csv):
    config = RunParameters(backend="reference", data=str(test_csv), limit=8).to_config()
    rows = config.instances()
    name = config.for_run("structured", 0).folder(rows).name
    assert name.startswith("structured-reference-default-test-n8-") and "seed0-dec" in name
    assert config.for_run("structured", 0, "drop_premise").folder(rows).name.endswith("probe-drop_premise")
    hotter = RunParameters(backend="reference", data=str(test_csv), limit=8, temperature=0.5).to_config()
    assert hotter.for_run(seed=0).folder(rows) != config.for_run(seed=0).folder(rows)
    api = RunParameters(backend="openai", model="m", data=str(test_csv), limit=8).to_config()
    moved = RunParameters(backend="openai", model="m", data=str(test_csv), limit=8, backend_options={
        "timeout": 5, "retries": 1, "base_url": "http://127.0.0.1:1/v1"}).to_config()
    assert moved.for_run(seed=0).folder(rows) == api.for_run(seed=0).folder(rows)  # how to reach, not what
    edited = [rows[0].model_copy(update={"hypothesis": "A directly causes B."}), *rows[1:]]
    assert config.for_run(seed=0).folder(edited) != config.for_run(seed=0).folder(rows)


def test_for_run_makes_one_run_whose_seed_is_its_decodings():
    config = RunParameters(backend="reference", seeds=[3, 4], temperature=0.8).to_config()
    run = config.for_run("baseline_enhanced", 4)
    assert isinstance(config, RunSet) and isinstance(run, RunConfig) and not hasattr(config, "seed")
    assert run.seed == run.spec.seed == run.decoding.seed == 4 and run.condition == "baseline_enhanced"
    assert "seeds" not in run.model_dump()
    assert Decoding(max_tokens_turn1=10, max_tokens_answer=5).one_turn_budget == 15


def test_a_config_json_of_a_set_of_one_seed_reads_as_that_run():
    """A folder's ``config.json`` written when a run was a set of one seed (``seeds: [s]``) reads as its run; a set
    of several seeds is no run."""
    run = RunParameters(backend="reference", seeds=[2], temperature=0.8).to_config().for_run()
    written = {**run.model_dump(mode="json"), "seeds": [2]}
    assert RunConfig.model_validate(written) == run
    with pytest.raises(ValidationError, match="a run has one seed, its decoding's \\(2\\); this names \\[2, 3\\]"):
        RunConfig.model_validate({**written, "seeds": [2, 3]})


def test_the_spec_alone_derives_identity_folder_and_group_and_transport_is_none_of_them(test_csv):
    """Two runs that differ only in how the model is reached are one run: one identity, one folder, one group."""
    common = {"backend": "openai", "model": "gpt-4o", "data": str(test_csv), "limit": 4, "temperature": 0.5}
    here = RunParameters(**common, backend_options={"base_url": ["http://127.0.0.1:8000/v1"]}).to_config().for_run()
    there = RunParameters(**common, backend_options={"base_url": ["http://localhost:8000/v1", "http://10.0.0.2:8000/v1"],
                                                     "timeout": 9, "retries": 4, "api_key_env": "OTHER_KEY"},
                          ).to_config().for_run()
    rows = here.instances()
    assert here.backend_options != there.backend_options and here.spec == there.spec
    assert here.spec.identity() == there.spec.identity() and here.folder(rows) == there.folder(rows)
    assert here.spec.group == there.spec.group == "openai-gpt-4o-seed0"
    for change in ({"temperature": 0.7}, {"max_tokens_turn1": 64}, {"backend_options": {"api": "responses"}},
                   {"condition": "minimal_instruction"}):
        other = RunParameters(**{**common, **change}).to_config().for_run()
        assert other.spec.identity() != here.spec.identity() and other.folder(rows) != here.folder(rows), change


def test_no_thinking_is_refused_for_a_model_that_always_reasons_and_chapters_leave_it_out():
    with pytest.raises(ValidationError, match="no off switch"):
        RunParameters(backend="openai", model="o3", condition="no_thinking").to_config()
    RunParameters(backend="openai", model="gpt-5.4-mini", condition="no_thinking").to_config()  # effort "none"
    from cpdagthink.book import experiments as ex

    setup = RunParameters(backend="openai", model="o4-mini").to_config()
    refused = ex.refusals(setup, ["structured", "no_thinking", "baseline_no_thinking"])
    assert set(refused) == {"no_thinking", "baseline_no_thinking"} and "no off switch" in refused["no_thinking"]


def test_a_service_without_sampling_parameters_is_recorded_with_its_own_sampling():
    config = RunParameters(backend="openai", model="gpt-5.4-mini", seeds=[0, 1, 2]).to_config()
    assert config.decoding.temperature == 1.0 and config.seeds == (0, 1, 2)  # the API samples at temperature 1
    with pytest.raises(ValueError, match="takes no sampling parameters"):
        RunParameters(backend="openai", model="gpt-5.4-mini", temperature=0.3).to_config()


def test_several_seeds_take_the_publishers_recommended_sampling():
    config = RunParameters(backend="vllm", model="Qwen/Qwen3.5-27B", seeds=[0, 1, 2]).to_config()
    assert (config.decoding.temperature, config.decoding.top_p, config.decoding.top_k) == (1.0, 0.95, 20)
    chosen = RunParameters(backend="vllm", model="Qwen/Qwen3.5-27B", seeds=[0, 1], temperature=0.6).to_config()
    assert chosen.decoding.temperature == 0.6 and chosen.decoding.top_p == 0.95  # explicit values win
    with pytest.raises(ValueError, match="no recommended sampling is known"):
        RunParameters(backend="reference", seeds=[0, 1]).to_config()


def test_a_small_sample_can_ask_for_more_positives_and_the_banner_says_so(test_csv):
    from cpdagthink.book import experiments as ex

    plain = RunParameters(backend="reference", data=str(test_csv), limit=4, sample_variables=[5]).to_config()
    assert sum(i.label for i in plain.instances()) == 1  # the split's share of n=5 rows rounds to one
    richer = RunParameters(backend="reference", data=str(test_csv), limit=4, sample_variables=[5],
                           sample_min_positives=2).to_config()
    rows = richer.instances()
    assert len(rows) == 4 and sum(i.label for i in rows) == 2 and {i.num_variables for i in rows} == {5}
    assert "at least 2 by choice" in str(ex.banner(richer, rows, [0]))
    assert "by choice" not in str(ex.banner(plain, rows, [0]))
    with pytest.raises(ValueError, match="cannot hold 5 positives"):
        RunParameters(backend="reference", data=str(test_csv), limit=4, sample_min_positives=5).to_config().instances()


def test_several_seeds_on_the_local_model_take_its_registered_sampling():
    from cpdagthink.backends.local.models import MODELS

    config = RunParameters(seeds=[0, 1]).to_config()  # the default local model
    expected = MODELS["qwen2.5-0.5b"].recommended_sampling
    assert (config.decoding.temperature, config.decoding.top_p, config.decoding.top_k) == (
        expected.temperature, expected.top_p, expected.top_k) and not config.decoding.greedy


def test_a_probe_needs_a_condition_that_emits_an_object():
    with pytest.raises(ValidationError, match="makes none"):
        RunParameters(backend="reference", condition="baseline_enhanced", probe="scramble_full").to_config()
    assert RunParameters(backend="reference", probe="scramble_full").to_config().probe == "scramble_full"


def test_an_option_the_backend_does_not_take_is_refused_by_the_config_itself():
    for options in ({"model": "x"}, {"timeout": 5}):
        with pytest.raises(ValidationError, match=f"backend 'reference' does not take {next(iter(options))}"):
            RunConfig(backend="reference", **({"model": "x"} if "model" in options else {"backend_options": options}))
    with pytest.raises(ValidationError, match="backend 'reference' does not take model"):
        RunParameters(backend="reference", model="x").to_config()


def test_repeated_seeds_are_refused_as_repeated_whatever_the_sampling():
    for params in ({"seeds": [3, 3]}, {"seeds": [3, 3], "temperature": 0.7}):
        with pytest.raises(ValidationError, match=r"seeds repeat: \[3, 3\] names 3 more than once") as raised:
            RunParameters(backend="reference", **params).to_config()
        assert "sampling" not in str(raised.value)
    with pytest.raises(ValidationError, match="seeds repeat"):
        RunSet(seeds=(1, 2, 1), decoding=Decoding(temperature=0.7))


def test_an_infinite_timeout_is_refused_by_name():
    with pytest.raises(ValidationError, match="timeout") as raised:
        RunParameters(backend="openai", model="m", backend_options={"timeout": "inf"})
    assert "finite number" in str(raised.value)


def test_a_key_in_the_base_url_is_kept_out_of_the_config_and_reaches_the_backend(monkeypatch):
    from cpdagthink.backends import make_backend
    from cpdagthink.credentials import ENV_CREDENTIALS

    monkeypatch.setenv(ENV_CREDENTIALS, "{}")  # and removed again after the test
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    params = RunParameters(backend="openai", model="m", backend_options={
        "base_url": ["http://me:sk-SECRET123456@127.0.0.1:9/v1", "http://127.0.0.1:8/v1"]})
    assert params.backend_options.base_url == ["http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1"]
    config = params.to_config()
    assert "SECRET" not in config.model_dump_json() and "SECRET" not in repr(config)
    built = RunConfig(backend="openai", model="m", backend_options={"base_url": "https://u:SECRET9@h.example/v1"})
    assert built.backend_options["base_url"] == "https://h.example/v1"
    backend = make_backend(config.backend, **config.backend_arguments())  # in this process or a notebook kernel
    assert backend._clients[0].api_key == "sk-SECRET123456" and "SECRET" not in str(backend.identity())


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/v1?api_key=sk-QUERY98765", "http://u:sk-QUERY/98765@127.0.0.1:9/v1"])
def test_a_key_in_a_query_string_or_not_percent_encoded_is_refused_quoting_none_of_it(url):
    for build in (lambda: RunParameters(backend="openai", model="m", backend_options={"base_url": [url]}),
                  lambda: RunConfig(backend="openai", model="m", backend_options={"base_url": url})):
        with pytest.raises(ValidationError, match="query string|percent-encode the key") as raised:
            build()
        assert "98765" not in str(raised.value)


def test_the_key_variable_is_a_name_never_a_key():
    assert RunParameters(backend="openai", model="m", backend_options={"api_key_env": "PROXY_KEY"}).to_config(
        ).backend_options == {"api_key_env": "PROXY_KEY"}
    with pytest.raises(ValidationError, match="api_key_env") as raised:
        RunParameters(backend="openai", model="m", backend_options={"api_key_env": "sk-pasted-the-key-12345"})
    assert "12345" not in str(raised.value)


@pytest.mark.parametrize("name", ["hf_token", "api_key", "token", "client_secret"])
def test_a_credential_is_never_a_backend_option_even_for_a_backend_that_takes_any(name):
    with pytest.raises(ValidationError, match=f"{name}: a credential is never a backend option") as raised:
        RunParameters(backend="vllm", model="m", backend_options={name: "hf_SECRET4321"})
    assert "4321" not in str(raised.value)


def test_data_that_cannot_give_the_sample_asked_for_is_refused(test_csv, tmp_path):
    from cpdagthink.run.data import DataError

    empty = tmp_path / "empty.csv"
    empty.write_text("input,label,num_variables,template\n")
    with pytest.raises(ValueError, match="empty.csv holds no rows"):
        RunParameters(backend="reference", data=str(empty)).to_config().instances()
    with pytest.raises(DataError, match="is a directory, not a CSV file"):
        RunParameters(backend="reference", data=str(tmp_path)).to_config().instances()
    too_many = RunParameters(backend="reference", data=str(test_csv), limit=1100, sample_min_positives=1000)
    with pytest.raises(ValueError, match="a sample of 1100 rows with at least 1000 gold positives cannot be drawn: "
                                         r"the 1162 rows it is drawn from hold \d+ positives"):
        too_many.to_config().instances()
    assert len(RunParameters(backend="reference", data=str(test_csv), limit=1100).to_config().instances()) == 1100


@pytest.mark.parametrize("backend, model", [("local", None), ("vllm", "Qwen/Qwen3.5-27B")])
def test_one_seeds_run_is_seed_0_of_several_seeds_runs(backend, model, test_csv):
    """The primary run is seed 0 of the sampled runs, so one seed samples as three do; greedy only when asked
    for."""
    one = RunParameters(backend=backend, model=model, data=str(test_csv), limit=4).to_config()
    three = RunParameters(backend=backend, model=model, data=str(test_csv), limit=4, seeds=[0, 1, 2]).to_config()
    assert not one.decoding.greedy and one.decoding == three.decoding
    rows = one.instances()
    assert one.for_run(seed=0).folder(rows) == three.for_run(seed=0).folder(rows)
    asked = RunParameters(backend=backend, model=model, sampling="greedy").to_config()
    assert asked.decoding.greedy


def test_a_long_model_name_still_names_a_folder_that_can_be_created(test_csv, tmp_path):
    """A 300-character model name names a run folder within a file name's 255 bytes."""
    long = "org/" + "m" * 300
    config = RunParameters(backend="openai", model=long, data=str(test_csv), limit=2,
                           out_root=str(tmp_path)).to_config().for_run()
    folder = config.folder(config.instances())
    assert len(folder.name.encode()) < 255
    folder.mkdir(parents=True)
    other = RunParameters(backend="openai", model=long + "x", data=str(test_csv), limit=2,
                          out_root=str(tmp_path)).to_config().for_run()
    assert other.folder(other.instances()) != folder


def test_thinking_off_conditions_sample_at_the_non_thinking_recommendation():
    """Qwen3.5's card recommends 1.0/0.95/20 with thinking and 0.7/0.8/20 without: each condition its mode's."""
    from cpdagthink.causal.instance import Instance
    from cpdagthink.method.conditions import CONDITIONS, first_request

    premise = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations "
               "among these 3 variables are as follows: A correlates with C. B correlates with C. However, A is "
               "independent of B.")
    instance = Instance(id="t-0", premise=premise, hypothesis="A directly causes C.", num_variables=3,
                        template="parent", label=1, split="t", source="test")

    def sampled(config):
        return config.decoding.temperature, config.decoding.top_p, config.decoding.top_k

    setup = RunParameters(backend="vllm", model="Qwen/Qwen3.5-27B", seeds=[0, 1]).to_config()
    assert sampled(setup.for_run("structured", 1)) == (1.0, 0.95, 20)
    for name in ("no_thinking", "baseline_no_thinking"):
        run = setup.for_run(name, 1)
        assert sampled(run) == (0.7, 0.8, 20) and run.decoding.seed == 1
        request = first_request(CONDITIONS[name], instance, run.decoding)
        assert (request.thinking, request.temperature, request.top_p) == (False, 0.7, 0.8)
    direct = RunParameters(backend="vllm", model="Qwen/Qwen3.5-27B", condition="no_thinking").to_config()
    assert sampled(direct) == (0.7, 0.8, 20) and sampled(direct.for_run("structured")) == (1.0, 0.95, 20)
    chosen = RunParameters(backend="vllm", model="Qwen/Qwen3.5-27B", seeds=[0, 1], temperature=0.6).to_config()
    assert chosen.for_run("no_thinking").decoding.temperature == 0.6  # a chosen sampling is kept
    local = RunParameters(seeds=[0, 1]).to_config()  # one recommendation only: the same for every condition
    assert sampled(local.for_run("no_thinking")) == sampled(local.for_run("structured"))


def test_the_sample_is_spelled_once_a_configs_sample_fields_are_its_samples_by_the_same_names(test_csv):
    from cpdagthink.run.spec import Sample

    config = RunConfig(backend="reference", data=str(test_csv), limit=3, sample_seed=7, sample_variables=(5,),
                       sample_min_positives=2)
    assert config.sample == Sample(data=str(test_csv), limit=3, sample_seed=7, sample_variables=(5,),
                                   sample_min_positives=2)
    assert config.sample.sample_seed != config.spec.seed == 0  # the sample's seed is never the decoding's
    for name, field in Sample.model_fields.items():  # every front door takes each of the sample's fields, by name
        assert RunConfig.model_fields[name].default == RunParameters.model_fields[name].default == field.default, name
    assert RunParameters(backend="reference", sample_seed=7).to_config().for_run().sample.sample_seed == 7


@pytest.mark.parametrize("option", ["max_concurrency=-3", "retries=1e9", "backoff_base=1e9", "base_url=",
                                    "base_url=file:///etc/passwd"])
def test_an_api_option_out_of_range_is_refused_by_name_and_never_stored(option, tmp_path):
    """What `-o` gives reaches config.json only when the backend's signature takes it as it is."""
    with pytest.raises(ValidationError, match=f"backend 'openai' option {option.partition('=')[0]}:"):
        RunParameters(backend="openai", model="m", backend_options=option).to_config()
