"""``globalpointer data fetch``: archives served by a real HTTP server on loopback, checked and laid out
as the shipped configs read them; damaged, foreign or conflicting files leave nothing written."""
import contextlib
import functools
import hashlib
import http.server
import io
import json
import os
import shutil
import tarfile
import threading
import zipfile

import pytest

from globalpointer.cli import main as cli
from globalpointer.cli import train_main
from globalpointer.data import public_sets
from globalpointer.data.public_sets import PUBLIC_SETS, PublicSet, SetFile, tsv_to_chars
from globalpointer.data.readers import read_records
from conftest import ROOT


@contextlib.contextmanager
def serving(folder):
    """A static HTTP server on 127.0.0.1 serving ``folder``; its base URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def zipped(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return path.read_bytes()


TRAIN = '{"text": "张三在北京", "label": {"name": {"张三": [[0, 1]]}}}\n{"text": "李四", "label": {}}\n'
DEV = '{"text": "王五", "label": {"name": {"王五": [[0, 1]]}}}\n'


@pytest.fixture
def toy_set(tmp_path, monkeypatch):
    """A set named ``toy`` whose archive (``served/toy.zip``, with a folder inside as real releases
    have) and files carry the MD5s its entry publishes."""
    served = tmp_path / "served"
    served.mkdir()
    archive = zipped(served / "toy.zip", {"toy/train.json": TRAIN, "toy/dev.json": DEV, "toy/README": "x"})
    entry = PublicSet("toy", "a test set", url="http://127.0.0.1:9/toy.zip", md5=hashlib.md5(archive).hexdigest(),
                      files=(SetFile("train.json", "train.json", md5=hashlib.md5(TRAIN.encode()).hexdigest()),
                             SetFile("dev.json", "dev.json", records=1, format="cluener")))
    monkeypatch.setitem(PUBLIC_SETS, "toy", entry)
    return served


def test_fetch_lays_out_checked_files_and_keeps_them(toy_set, tmp_path, capsys):
    with serving(toy_set) as base:
        assert cli(["data", "fetch", "toy", "--from", f"{base}/toy.zip", "--to", str(tmp_path / "data")]) == 0
        assert (tmp_path / "data" / "toy" / "train.json").read_text(encoding="utf-8") == TRAIN
        assert [r.text for r in read_records(str(tmp_path / "data" / "toy" / "dev.json"))] == ["王五"]
        assert sorted(os.listdir(tmp_path / "data" / "toy")) == ["dev.json", "train.json"]  # no partial files
        # a second fetch finds the same files and keeps them
        stamp = os.stat(tmp_path / "data" / "toy" / "train.json").st_mtime_ns
        assert cli(["data", "fetch", "toy", "--from", f"{base}/toy.zip", "--to", str(tmp_path / "data")]) == 0
        assert os.stat(tmp_path / "data" / "toy" / "train.json").st_mtime_ns == stamp
    # the archive downloaded already, as a file
    assert cli(["data", "fetch", "toy", "--from", str(toy_set / "toy.zip"), "--to", str(tmp_path / "other")]) == 0
    assert (tmp_path / "other" / "toy" / "dev.json").read_text(encoding="utf-8") == DEV


def test_fetch_from_the_folder_an_archive_was_unpacked_into_and_not_from_one_of_its_files(toy_set, tmp_path,
                                                                                           capsys):
    unpacked = tmp_path / "unpacked" / "toy"
    unpacked.mkdir(parents=True)
    (unpacked / "train.json").write_text(TRAIN, encoding="utf-8")
    (unpacked / "dev.json").write_text(DEV, encoding="utf-8")
    assert cli(["data", "fetch", "toy", "--from", str(tmp_path / "unpacked"), "--to", str(tmp_path / "data")]) == 0
    assert (tmp_path / "data" / "toy" / "train.json").read_text(encoding="utf-8") == TRAIN
    # each file's own checks still apply to a folder
    (unpacked / "train.json").write_text(TRAIN + TRAIN, encoding="utf-8")
    assert cli(["data", "fetch", "toy", "--from", str(unpacked), "--to", str(tmp_path / "other")]) != 0
    assert "train.json has MD5" in capsys.readouterr().err and not (tmp_path / "other").exists()
    assert cli(["data", "fetch", "toy", "--from", str(unpacked / "dev.json"), "--to", str(tmp_path / "other")]) != 0
    err = capsys.readouterr().err
    assert "dev.json is one of toy's files, not its archive: pass the archive, or the folder that holds all of " \
           "train.json, dev.json" in err and "cut short" not in err


def test_a_users_file_in_the_way_is_kept_and_nothing_is_written(toy_set, tmp_path, capsys):
    (tmp_path / "data" / "toy").mkdir(parents=True)
    (tmp_path / "data" / "toy" / "dev.json").write_text("my own dev set\n")
    assert cli(["data", "fetch", "toy", "--from", str(toy_set / "toy.zip"), "--to", str(tmp_path / "data")]) == 2
    assert "dev.json is there already and differs" in capsys.readouterr().err
    assert (tmp_path / "data" / "toy" / "dev.json").read_text() == "my own dev set\n"
    assert os.listdir(tmp_path / "data" / "toy") == ["dev.json"]  # train.json, which passed, is not written either


@pytest.mark.parametrize("damage, says", [
    ("archive", "MD5"),  # another archive than the published one
    ("member", "train.json has MD5"),  # a file changed inside an archive of the same checksum-less kind
    ("records", "dev.json has 2 records, but toy's has 1"),
    ("missing", "no dev.json in the archive (it holds README, train.json)"),
    ("truncated", "neither a zip nor a tar archive"),
    # what the fifth attack found: lines that only count, two candidates, what unpacking builds
    ("not records", "dev.json:1: malformed JSON"),
    ("two candidates", "two files for dev.json (toy/dev.json and copy/dev.json)"),
    ("expands", "bytes unpacked from the archive in all"),
    ("entries", "more than 2 entries"),
    ("lines", "more than 0 lines"),
])
def test_a_damaged_or_foreign_archive_writes_nothing(toy_set, tmp_path, monkeypatch, capsys, damage, says):
    entry = PUBLIC_SETS["toy"]
    members = {"toy/train.json": TRAIN, "toy/dev.json": DEV, "toy/README": "x"}
    if damage == "archive":
        members["toy/NOTES"] = "another release"
    if damage == "member":
        members["toy/train.json"] = TRAIN.replace("张三", "张四")
    if damage == "records":
        members["toy/dev.json"] = DEV * 2
    if damage == "missing":
        del members["toy/dev.json"]
    if damage == "not records":
        members["toy/dev.json"] = "x\n"
    if damage == "two candidates":
        members["copy/dev.json"] = DEV
    limits = {"expands": ("MAX_EXPANDED_BYTES", len(TRAIN.encode()) + 5), "entries": ("MAX_ARCHIVE_MEMBERS", 2),
              "lines": ("MAX_MEMBER_LINES", 0)}
    if damage in limits:  # the bounds, small: the same code path as a zip of gigabytes
        monkeypatch.setattr(public_sets, *limits[damage])
    content = zipped(tmp_path / "bad.zip", members)
    if damage == "truncated":
        (tmp_path / "bad.zip").write_bytes(content[: len(content) // 2])
    if damage != "archive":  # the checks of the files, not the archive's, are under test
        monkeypatch.setitem(PUBLIC_SETS, "toy", PublicSet(entry.title, entry.source, entry.url, None, entry.files))
    with serving(tmp_path) as base:
        assert cli(["data", "fetch", "toy", "--from", f"{base}/bad.zip", "--to", str(tmp_path / "data")]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_unreachable_sources_and_sets_behind_a_licence_say_what_to_do(toy_set, tmp_path, capsys):
    with serving(toy_set) as base:
        assert cli(["data", "fetch", "toy", "--from", f"{base}/gone.zip", "--to", str(tmp_path)]) == 2
    assert "HTTP 404" in capsys.readouterr().err
    assert cli(["data", "fetch", "toy", "--to", str(tmp_path)]) == 2  # its source: a closed port
    error = capsys.readouterr().err
    assert "no usable answer (" in error and "pass the file or the mirror's URL with --from" in error
    assert cli(["data", "fetch", "conll2003", "--to", str(tmp_path / "d")]) == 2
    error = capsys.readouterr().err
    assert "cannot be downloaded automatically" in error and os.path.join(str(tmp_path / "d"), "conll2003") in error
    assert cli(["data", "fetch", "toy", "--from", "http://[::1", "--to", str(tmp_path)]) == 2  # a broken IPv6 host
    error = capsys.readouterr().err
    assert error.startswith("error: --from: 'http://[::1' is no valid address") and "Traceback" not in error
    assert cli(["data", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in ("cluener", "msra", "cmeee", "conll2003"))


def test_msra_is_converted_from_paddlenlps_tsv_to_characters(tmp_path, monkeypatch):
    """PaddleNLP's layout (a header, then characters and tags \\x02-joined) becomes the chars format
    configs/msra.yaml reads, with the entities where the tags put them."""
    tsv = "text_a\tlabel\n" + "\x02".join("张三去北京") + "\t" + "\x02".join(
        ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]) + "\n" + "\x02".join("好") + "\tO\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("msra_ner/train.tsv")
        info.size = len(tsv.encode())
        archive.addfile(info, io.BytesIO(tsv.encode()))
    (tmp_path / "msra_ner.tar.gz").write_bytes(buffer.getvalue())
    monkeypatch.setitem(PUBLIC_SETS, "msra", PublicSet("MSRA", "test", url="http://127.0.0.1:9/", files=(
        SetFile("msra_train_bio.txt", "train.tsv", md5=hashlib.md5(tsv.encode()).hexdigest(), convert=tsv_to_chars),)))
    assert cli(["data", "fetch", "msra", "--from", str(tmp_path / "msra_ner.tar.gz"), "--to", str(tmp_path)]) == 0
    records = read_records(str(tmp_path / "msra" / "msra_train_bio.txt"))
    assert [r.text for r in records] == ["张三去北京", "好"]
    assert [(e.start, e.end, e.type) for e in records[0].entities] == [(0, 2, "PER"), (3, 5, "LOC")]


def test_a_malformed_tsv_line_is_named():
    with pytest.raises(Exception, match="line 2: expected characters and as many tags"):
        tsv_to_chars("text_a\tlabel\n张\x02三\tB-PER\n".encode())


def test_the_published_checksums_match_the_copies_here(shared_data):
    """CMeEE's dev and test MD5s (PaddleNLP's) are those of the files the results were measured on; the
    CLUENER counts are its files'."""
    shared_data = shared_data("cluener")
    for wanted in PUBLIC_SETS["cmeee"].files:
        path = os.path.join(shared_data, "cmeee", wanted.name)
        if os.path.isfile(path):
            assert hashlib.md5(open(path, "rb").read()).hexdigest() == wanted.md5
    for wanted in PUBLIC_SETS["cluener"].files:
        lines = open(os.path.join(shared_data, "cluener", wanted.name), "rb").read().splitlines()
        assert sum(1 for line in lines if line.strip()) == wanted.records


@pytest.mark.slow
def test_the_cluener_config_trains_from_a_clone_after_the_documented_fetch(shared_data, tmp_path, monkeypatch):
    """A clone's layout (configs/ beside data/), CLUENER's release served on loopback in place of its
    source, the fetch the docs give, then configs/cluener.yaml as shipped (shortened with --set)."""
    shared_data = shared_data("cluener")
    served = tmp_path / "served"
    served.mkdir()
    zipped(served / "cluener_public.zip", {name: open(os.path.join(shared_data, "cluener", name), "rb").read()
                                           for name in ("train.json", "dev.json", "test.json", "README.md")})
    clone = tmp_path / "clone"
    (clone / "configs").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "configs", "cluener.yaml"), clone / "configs")
    monkeypatch.chdir(clone)
    with serving(served) as base:
        assert cli(["data", "fetch", "cluener", "--from", f"{base}/cluener_public.zip"]) == 0
    assert sorted(os.listdir(clone / "data" / "cluener")) == ["dev.json", "test.json", "train.json"]
    assert train_main(["--config", "configs/cluener.yaml", "--set", "data.limit=24", "--set", "train.epochs=1",
                       "--set", "train.min_steps=0", "--set", "train.batch_size=8"]) == 0
    summary = json.load(open(clone / "runs" / "cluener-gp" / "summary.json"))
    assert summary["steps"] >= 1 and os.path.isfile(clone / "runs" / "cluener-gp" / "best" / "model.safetensors")



def test_a_shipped_configs_missing_file_names_the_command_that_fetches_it(tmp_path, monkeypatch, capsys):
    """A newcomer's first train with a shipped config met "file not found" alone."""
    from globalpointer.cli import train_main
    from helpers import ROOT

    assert train_main(["--config", os.path.join(ROOT, "configs", "msra.yaml"),
                       "--set", f"data.train={tmp_path}/msra/msra_train_bio.txt"]) == 2
    assert "a file of the public set msra: fetch it with globalpointer data fetch msra --to " in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    assert train_main(["--config", os.path.join(ROOT, "configs", "conll2003.yaml"), "--set",
                       "data.train=data/conll2003/train.txt"]) == 2
    err = capsys.readouterr().err
    assert "the public set conll2003, which is not fetched: sign the Reuters corpus agreement" in err
    assert "put train.txt, valid.txt and test.txt in data/conll2003/" in err
    from globalpointer.corpus import load_records
    from globalpointer.errors import DataError

    with pytest.raises(DataError, match="public set cluener: fetch it with globalpointer data fetch cluener$"):
        load_records("data/cluener/dev.json")  # evaluate --data, calibrate --data: the same words
    (tmp_path / "mine").mkdir()
    assert train_main(["--config", os.path.join(ROOT, "configs", "quickstart.yaml"),
                       "--set", "data.train=mine/train.json"]) == 2
    assert "fetch" not in capsys.readouterr().err  # not a set's file: the path rule, as before


def test_a_partial_copy_of_a_set_is_said_file_by_file(tmp_path):
    """Benches and tests check a copy before they use it ($GLOBALPOINTER_DATA): a missing file, or one
    cut short, is named; the files asked for alone are checked."""
    from globalpointer.data.public_sets import incomplete

    (tmp_path / "cluener").mkdir()
    (tmp_path / "cluener" / "train.json").write_text('{"text": "x"}\n' * 10748)
    (tmp_path / "cluener" / "dev.json").write_text('{"text": "x"}\n' * 1000)
    assert incomplete(str(tmp_path), "cluener") == [f"{tmp_path}/cluener/dev.json has 1000 records, not 1343",
                                                   f"{tmp_path}/cluener/test.json is missing"]
    assert incomplete(str(tmp_path), "cluener", ["train.json"]) == []


@pytest.mark.parametrize("config, name", [("duie.yaml", "duie2-subset"), ("conll04.yaml", "conll04"),
                                          ("scierc.yaml", "scierc"), ("phee.yaml", "phee"), ("duee.yaml", "duee")])
def test_a_relation_or_event_config_without_its_data_says_where_the_set_comes_from(config, name, capsys):
    """The relation and event configs read data/relations/<set>/ and data/events/<set>/: a missing file names the set and how to get it,
    as `data list` does, and the copy in ../shared/data is complete by the same check."""
    from conftest import SHARED_DATA
    from globalpointer.cli import main as cli
    from globalpointer.data.public_sets import incomplete

    assert cli(["train", "--config", os.path.join(ROOT, "configs", config), "--set", "output_dir=/nonexistent/run"]) == 2
    said = capsys.readouterr().err
    folder = "events" if name in ("phee", "duee") else "relations"
    assert f"a file of the public set {name}, which is not fetched:" in said and f"{folder}/{name}/" in said, said
    assert cli(["data", "list"]) == 0
    assert f"by hand: " in capsys.readouterr().out
    if os.path.isdir(os.path.join(SHARED_DATA, folder, name)):
        assert incomplete(SHARED_DATA, name) == []
