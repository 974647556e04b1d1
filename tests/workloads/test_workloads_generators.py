"""The generators on Spark: deterministic bytes, honest manifests, and answers a plain-Python
computation agrees with. One Spark session serves the whole test session."""

from __future__ import annotations

import math
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from weir.workloads import dataset, keyed, nexmark, reference
from weir.workloads.generate import generate, make_params
from weir.workloads.spark import SparkUnavailable, check_java, spark_session
from weir.workloads.testing import SMALL_KEYED_UNIFORM


def _bytes(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_the_same_seed_gives_byte_identical_files(keyed_uniform: Path, tmp_path: Path) -> None:
    spark = spark_session("local[2]")
    options = {k: v for k, v in SMALL_KEYED_UNIFORM.items() if k not in ("kind", "events", "seed")}
    again = generate("keyed", make_params("keyed", 20_000, 3, **options), tmp_path / "again", spark=spark)
    assert again["checksum"] == dataset.load_manifest(keyed_uniform)["checksum"]
    assert _bytes(tmp_path / "again") == _bytes(keyed_uniform)  # data, expected answers and manifest
    other = generate("keyed", make_params("keyed", 20_000, 4, **options), tmp_path / "other", spark=spark)
    assert other["checksum"] != again["checksum"]


def test_the_manifest_describes_the_files(keyed_uniform: Path, tmp_path: Path) -> None:
    manifest = dataset.load_manifest(keyed_uniform)
    assert manifest["generator"] == "keyed" and manifest["seed"] == 3
    assert manifest["parameters"]["events"] == 20_000 and manifest["parameters"]["keys"] == 50
    events = manifest["tables"]["events"]
    files = dataset.table_files(keyed_uniform, manifest, "events")
    assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet"]
    import pyarrow as pa

    table = pa.concat_tables([pq.read_table(f) for f in files])
    assert events["rows"] == table.num_rows == 20_000
    assert [c["name"] for c in events["schema"]] == ["key", "value", "event_time", "payload"]
    times = table.column("event_time").to_pylist()
    assert events["event_time"] == {"min": min(times), "max": max(times)}
    assert set(manifest["expected"]) == set(keyed.QUERIES)
    assert dataset.verify(keyed_uniform) == []
    copy = tmp_path / "copy"
    shutil.copytree(keyed_uniform, copy)
    part = copy / events["files"][0]["path"]
    part.write_bytes(part.read_bytes()[:-1] + b"\0")
    assert dataset.verify(copy) == [f"{events['files'][0]['path']}: checksum differs"]


def test_event_times_are_out_of_order_by_at_most_the_disorder_bound(keyed_uniform: Path) -> None:
    rows = reference.read_table(keyed_uniform, "events")
    bound = dataset.load_manifest(keyed_uniform)["parameters"]["disorder_ms"]
    newest, worst = -math.inf, 0
    for r in rows:
        worst = max(worst, newest - r["event_time"])
        newest = max(newest, r["event_time"])
    assert 0 < worst <= bound


@pytest.mark.parametrize("query", keyed.QUERIES)
def test_spark_answers_keyed_queries_like_plain_python(keyed_uniform: Path, query: str) -> None:
    expected = reference.read_expected(keyed_uniform, query)
    assert expected and expected == reference.answer(keyed_uniform, query)


@pytest.mark.slow
@pytest.mark.parametrize("query", keyed.QUERIES)
def test_spark_answers_on_zipf_keys_like_plain_python(keyed_zipf: Path, query: str) -> None:
    assert reference.read_expected(keyed_zipf, query) == reference.answer(keyed_zipf, query)


@pytest.mark.slow
def test_zipf_keys_are_skewed_as_the_exponent_says(keyed_zipf: Path, keyed_uniform: Path) -> None:
    counts = Counter(r["key"] for r in reference.read_table(keyed_zipf, "events"))
    n = sum(counts.values())
    weights = [1 / k**1.1 for k in range(1, 51)]
    share = weights[0] / sum(weights)  # the hottest key's probability
    sigma = math.sqrt(n * share * (1 - share))
    assert abs(counts[keyed.key_name(0, 50)] - n * share) < 4 * sigma
    assert counts.most_common(1)[0][0] == keyed.key_name(0, 50)
    uniform = Counter(r["key"] for r in reference.read_table(keyed_uniform, "events"))
    assert max(uniform.values()) < 1.3 * min(uniform.values())


@pytest.mark.slow
@pytest.mark.parametrize("query", nexmark.QUERIES)
def test_spark_answers_nexmark_queries_like_plain_python(nexmark_small: Path, query: str) -> None:
    expected = reference.read_expected(nexmark_small, query)
    assert expected and expected == reference.answer(nexmark_small, query)


@pytest.mark.slow
def test_nexmark_follows_the_generator_model(nexmark_small: Path) -> None:
    manifest = dataset.load_manifest(nexmark_small)
    rows = {t: manifest["tables"][t]["rows"] for t in ("persons", "auctions", "bids")}
    assert rows == {"persons": 600, "auctions": 1800, "bids": 27_600}  # 2% / 6% / 92% of 30,000
    bids = reference.read_table(nexmark_small, "bids")
    times = [b["date_time"] for b in bids]
    assert times == sorted(times)  # evenly spaced in event time, no disorder by default
    # half of the bids go to the current hot auction, three quarters come from a hot bidder
    epoch = [b["event_id"] // 50 for b in bids]
    hot_auction = [(e * 3 + 2) // 100 * 100 + 1000 for e in epoch]
    hot_bidder = [e // 100 * 100 + 1 + 1000 for e in epoch]
    share_auction = sum(b["auction"] == h for b, h in zip(bids, hot_auction)) / len(bids)
    share_bidder = sum(b["bidder"] == h for b, h in zip(bids, hot_bidder)) / len(bids)
    assert 0.45 < share_auction < 0.6 and 0.7 < share_bidder < 0.8
    auctions = {a["id"] for a in reference.read_table(nexmark_small, "auctions")}
    assert sum(b["auction"] in auctions for b in bids) > 0.9 * len(bids)


def test_a_missing_java_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkUnavailable, match=r"Java not found.*openjdk-17"):
        check_java()


def test_bad_generator_options_are_named() -> None:
    from weir.errors import UsageError

    with pytest.raises(UsageError, match="keys must be a positive integer"):
        make_params("keyed", 10, 0, keys=0)
    with pytest.raises(UsageError, match="no option"):
        make_params("nexmark", 10, 0, keys=5)
    with pytest.raises(UsageError, match="unknown workload generator"):
        make_params("tpch", 10, 0)
