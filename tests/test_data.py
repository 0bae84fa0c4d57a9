"""The data loader: local CSVs, the fingerprint check, and clear errors."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from cpdagthink.run import data
from cpdagthink.run.data import DataError, load_split, read_csv


def test_real_split_loads_and_matches_its_fingerprint(test_csv):
    instances = load_split("test", test_csv)
    assert len(instances) == 1162 and sum(i.label for i in instances) == 180
    assert instances[0].id == "test-00000" and instances[0].text.startswith("Premise:")
    assert {i.num_variables for i in instances} == {2, 3, 4, 5, 6}


def test_environment_variable_points_to_the_split(test_csv, monkeypatch):
    monkeypatch.setenv(data.ENV_CSV, str(test_csv))
    assert len(load_split("test")) == 1162


def test_a_different_file_fails_the_fingerprint(test_csv, tmp_path):
    rows = list(csv.DictReader(open(test_csv, encoding="utf-8")))[:-1]
    short = tmp_path / "short.csv"
    with short.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=rows[0].keys())
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(DataError, match="fingerprint"):
        load_split("test", short)


def test_missing_file_and_missing_columns(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_split("test", tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nx,1\n")
    with pytest.raises(DataError, match="lacks the Corr2Cause column"):
        read_csv(bad)


def test_offline_hub_says_which_file_to_place_where(monkeypatch, tmp_path):
    """``$CORR2CAUSE_CSV`` is the test split's copy only: another split's file goes beside it, by its hub name."""
    monkeypatch.setenv(data.ENV_CSV, str(tmp_path / "copies" / "test.csv"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="connect to the hub, or place its perturbation_by_paraphrasing_test.csv at "
                       + re.escape(str(tmp_path / "copies" / "perturbation_by_paraphrasing_test.csv"))):
        data.download_split("perturbation_by_paraphrasing", cache=tmp_path)
    with pytest.raises(DataError, match="connect to the hub, or set CORR2CAUSE_CSV to its test.csv"):
        data.download_split("test", cache=tmp_path)


def test_unknown_split_is_named():
    with pytest.raises(DataError, match="unknown split"):
        data.download_split("validation")


# --------------------------------------------------------------------------------------- hostile inputs

GOOD_ROW = ("Premise: Suppose there is a closed system of 2 variables, A and B. All the statistical relations "
            "among these 2 variables are as follows: A correlates with B.\nHypothesis: A directly causes B.")


def _write(path, rows, header=("input", "label", "num_variables", "template"), encoding="utf-8"):
    with path.open("w", newline="", encoding=encoding) as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = _write(tmp_path / "bom.csv", [(GOOD_ROW, 0, 2, "parent")], encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    [instance] = read_csv(path)
    assert instance.label == 0 and instance.hypothesis == "A directly causes B."


@pytest.mark.parametrize(
    "rows, message",
    [
        ([(GOOD_ROW, 0, 2, "parent"), (GOOD_ROW, 1, 2)], r"row 2 \(line 5\): the row has fewer fields"),
        ([(GOOD_ROW, 0, 2, "parent", "extra")], r"row 1 .*more fields"),
        ([(GOOD_ROW, 2, 2, "parent")], r"row 1 .*label must be 0 or 1, got '2'"),
        ([(GOOD_ROW, "yes", 2, "parent")], r"label must be 0 or 1, got 'yes'"),
        ([(GOOD_ROW, 1, 3, "parent")], r"num_variables is 3 but the premise names 2 variables"),
        ([(GOOD_ROW, 1, "two", "parent")], r"num_variables must be a whole number"),
        ([(GOOD_ROW + "x" * 5_000_000, 0, 2, "parent")], r"row 1 .*not a readable CSV row \(field larger"),
    ],
    ids=["too-few-fields", "too-many-fields", "label-2", "label-word", "num-variables-contradicts", "num-variables-word",
         "5MB-field"],
)
def test_bad_rows_are_named_by_file_and_row(tmp_path, rows, message):
    path = _write(tmp_path / "bad.csv", rows)
    with pytest.raises(DataError, match=message) as caught:
        read_csv(path)
    assert str(path) in str(caught.value)


def test_an_unreadable_premise_is_left_to_the_run(tmp_path):
    """Only a premise whose header names its variables is checked against num_variables."""
    odd = GOOD_ROW.replace("closed system of 2 variables, A and B.", "system of A and B.")
    [instance] = read_csv(_write(tmp_path / "odd.csv", [(odd, 1, 7, "parent")]))
    assert instance.num_variables == 7


def test_non_utf8_and_binary_files_are_refused_by_name(tmp_path):
    latin = tmp_path / "latin.csv"
    latin.write_bytes(f"input,label,num_variables,template\n\"{GOOD_ROW} caf\xe9\",0,2,parent\n".encode("latin-1"))
    with pytest.raises(DataError, match=f"{latin} is not UTF-8 text"):
        read_csv(latin)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"input,label,num_variables,template\n\x00\x01\x02,0,2,parent\n")
    with pytest.raises(DataError, match=f"{binary}, row 1"):
        read_csv(binary)


def test_content_hash_follows_the_row_not_its_place(tmp_path):
    rows = [(GOOD_ROW, 0, 2, "parent"), (GOOD_ROW, 1, 2, "parent")]
    first, second = read_csv(_write(tmp_path / "a.csv", rows))
    assert first.content_sha256 != second.content_sha256  # the label differs
    (tmp_path / "elsewhere").mkdir()
    [moved] = read_csv(_write(tmp_path / "elsewhere" / "b.csv", rows[1:]), split="other")
    assert moved.id != second.id and moved.content_sha256 == second.content_sha256
    edited = second.model_copy(update={"hypothesis": "B directly causes A."})
    assert edited.content_sha256 != second.content_sha256


def test_without_a_local_split_tests_use_the_hub_and_fail_in_ci(monkeypatch, tmp_path):
    import conftest

    monkeypatch.setenv(data.ENV_CSV, str(tmp_path / "absent.csv"))
    downloaded = tmp_path / "hub" / "test.csv"
    monkeypatch.setattr(data, "download_split", lambda split: downloaded)
    assert conftest.locate_test_split() == downloaded

    def offline(split):
        raise DataError("could not fetch split 'test': set CORR2CAUSE_CSV or connect to the hub")

    monkeypatch.setattr(data, "download_split", offline)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="neither local .* nor downloadable: could not fetch"):
        conftest.locate_test_split()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="nor downloadable"):
        conftest.locate_test_split()


def test_the_paraphrase_split_is_checked_against_its_published_size(test_csv):
    from cpdagthink.run.data import DataError, read_csv, verify_fingerprint

    rows = read_csv(test_csv)
    with pytest.raises(DataError, match="perturbation_by_paraphrasing"):
        verify_fingerprint(rows, "perturbation_by_paraphrasing")  # 1162 rows, not 2246
    verify_fingerprint(rows + rows[:1084], "perturbation_by_paraphrasing")  # only the size is published
    verify_fingerprint(rows, "test")


def _write_split(path, rows):
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["input", "label", "num_variables", "template"])
        writer.writerows([r.text, r.label, r.num_variables, r.template] for r in rows)
    return path


def test_a_downloaded_split_keeps_the_fingerprint_of_its_first_download(test_csv, tmp_path, monkeypatch):
    """The paraphrase split publishes only its size; once downloaded, its positives and template counts are
    stored beside it, and a later copy of the same size but other content is refused."""
    from cpdagthink.run.data import fingerprint, stored_fingerprint_path

    rows = read_csv(test_csv)
    rows = rows + rows[:1084]  # the published size, 2246
    downloaded = _write_split(tmp_path / "paraphrase.csv", rows)
    monkeypatch.setattr(data, "HUB_CACHE", tmp_path / "hub")
    monkeypatch.setattr(data, "download_split", lambda split: downloaded)
    first = load_split("perturbation_by_paraphrasing")
    stored = data.Fingerprint.model_validate_json(stored_fingerprint_path("perturbation_by_paraphrasing").read_text())
    assert stored == fingerprint(first) and stored.positives == sum(r.label for r in rows) and stored.templates
    assert load_split("perturbation_by_paraphrasing") == first  # the same file still matches

    flipped = [rows[0].model_copy(update={"label": 1 - rows[0].label}), *rows[1:]]
    _write_split(downloaded, flipped)
    with pytest.raises(DataError, match="positives"):
        load_split("perturbation_by_paraphrasing")


def test_a_row_as_long_as_the_oracles_bound_admits_is_read(tmp_path):
    """A premise of the oracle's bound of variables stating every independence (the longest there is) is past
    Python's csv field limit; the loader reads it all the same."""
    import csv as csv_module
    from itertools import combinations

    from cpdagthink.causal.oracle import MAX_VARIABLES
    from cpdagthink.causal.premise import Facts, pair, verbalise_premise
    from cpdagthink.run.data import FIELD_LIMIT, read_csv

    names = tuple("ABCDEFGHIJKLMNOP"[:MAX_VARIABLES])
    independencies = {pair(x, y): frozenset(frozenset(s) for k in range(MAX_VARIABLES - 1)
                                            for s in combinations([v for v in names if v not in (x, y)], k))
                      for x, y in combinations(names, 2)}
    text = verbalise_premise(Facts(names, frozenset(), independencies)) + "\nHypothesis: A directly causes B."
    assert 131_072 < len(text) < FIELD_LIMIT  # 131,072: the csv module's own limit
    path = tmp_path / "long.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv_module.writer(handle).writerows([["input", "label", "num_variables", "template"],
                                             [text, "0", str(MAX_VARIABLES), "parent"]])
    [row] = read_csv(path)
    assert row.text == text


def test_the_test_split_is_found_as_the_makefile_finds_it(monkeypatch, tmp_path, test_csv):
    """$CORR2CAUSE_CSV when set, else the workspace copy beside the checkout, else the hub: offline, a command
    run without the variable reads the workspace copy, as `make` would."""
    assert data.WORKSPACE_CSV == data.PROJECT_ROOT.parent / "shared" / "corr2cause" / "test.csv"  # beside the checkout
    copy = tmp_path / "shared" / "corr2cause" / "test.csv"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(Path(test_csv).read_bytes())
    monkeypatch.setattr(data, "WORKSPACE_CSV", copy)
    monkeypatch.delenv(data.ENV_CSV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert data.local_test_csv() == str(copy) and len(data.load_split("test")) == 1162
    monkeypatch.setenv(data.ENV_CSV, str(test_csv))
    assert data.local_test_csv() == str(test_csv)  # the variable wins, as in the Makefile


def test_a_one_count_sample_is_the_rows_it_always_was(test_csv):
    """The default sample of one variable count draws the rows it drew before counts were stratified, so the
    run folders and caches named by their digest stay valid."""
    from cpdagthink.run.spec import Sample, rows_sha256

    rows = read_csv(test_csv, split="test")
    five = [r for r in rows if r.num_variables == 5]
    for limit, seed, least in [(4, 0, 2), (20, 3, 1), (7, 1, 0)]:
        assert data.sample_by_variables(rows, limit, [5], seed, least) == data.sample(five, limit, seed, least)
    drawn = Sample(limit=4, sample_variables=(5,), sample_min_positives=2, data=str(test_csv)).instances()
    assert [r.id for r in drawn] == ["test-00322", "test-00552", "test-00608", "test-00638"]
    assert rows_sha256(drawn).startswith("2816c11c")  # the default book's run folders: ...-n4-2816c11c-...


def test_several_counts_take_an_equal_label_stratified_share_each(test_csv):
    rows = read_csv(test_csv, split="test")
    drawn = data.sample_by_variables(rows, 4, [6, 5], seed=0, min_positives=2)
    assert drawn == data.sample_by_variables(rows, 4, [5, 6, 5], seed=0, min_positives=2)  # seeded, counts as a set
    assert [r.id for r in drawn] == sorted(r.id for r in drawn)  # the split's order
    for n in (5, 6):
        share = [r for r in drawn if r.num_variables == n]
        assert len(share) == 2 and sum(r.label for r in share) == 1  # each count: half the positives asked
        assert share == data.sample([r for r in rows if r.num_variables == n], 2, 0, 1)
    uneven = data.sample_by_variables(rows, 5, [5, 6], seed=1, min_positives=3)
    assert [sum(r.num_variables == n for r in uneven) for n in (5, 6)] == [3, 2]
    assert [sum(r.label for r in uneven if r.num_variables == n) for n in (5, 6)] == [2, 1]
    assert data.sample_by_variables(rows, 40, [5, 6], seed=2) != data.sample_by_variables(rows, 40, [5, 6], seed=3)
    assert data.shares(5, 2) == [3, 2] and data.shares(1, 2) == [1, 0] and data.shares(6, 3) == [2, 2, 2]


def test_a_sample_of_several_counts_names_a_count_no_row_has_and_takes_all_when_asked_for_more(test_csv):
    rows = read_csv(test_csv, split="test")
    with pytest.raises(ValueError, match=r"no row has \[9\] variables"):
        data.sample_by_variables(rows, 4, [5, 9])
    with pytest.raises(ValueError, match="a sample of 4 rows cannot hold 9 positives"):  # the whole sample's
        data.sample_by_variables(rows, 4, [5, 6], min_positives=9)
    small = [r for r in rows if r.num_variables in (2, 3)]
    assert data.sample_by_variables(rows, len(small), [2, 3]) == small
    two = sum(r.num_variables == 2 for r in rows)
    with pytest.raises(ValueError, match=f"hold only {two} with 2 variables: lower --limit"):
        data.sample_by_variables(rows, 2 * two + 2, [2, 5])  # two's share is one more than it has
