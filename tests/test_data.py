"""The data loader: local CSVs, the fingerprint check, and clear errors."""

from __future__ import annotations

import csv

import pytest

from cpdagthink import data
from cpdagthink.data import DataError, load_split, read_csv


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


def test_offline_hub_gives_the_advice(monkeypatch, tmp_path):
    monkeypatch.delenv(data.ENV_CSV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="set CORR2CAUSE_CSV or connect to the hub"):
        data.download_split("perturbation_by_paraphrasing", cache=tmp_path)


def test_unknown_split_is_named():
    with pytest.raises(DataError, match="unknown split"):
        data.download_split("validation")
