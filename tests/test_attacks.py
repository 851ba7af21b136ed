"""The attacks of docs/RELIABILITY.md, as a careless or hostile user would try them: nothing the user
has is lost or overwritten, and every mistake ends in one line naming the path or key (exit 2)."""
import csv
import io
import json
import logging
import os
import shutil

import pytest

from globalpointer.cli import main as cli
from globalpointer.cli import evaluate_main, predict_main, train_main
from globalpointer.config import load_config
from globalpointer.data.features import AlignmentReport, Featurizer
from globalpointer.data.readers import read_records
from globalpointer.model.encoders import bert_tokenizer
from globalpointer.errors import CheckpointError, ConfigError, DataError
from globalpointer.checkpoint import load_checkpoint
from globalpointer.inference.file_prediction import PredictionWriter, predict_file, predict_stream
from synthetic import tiny_config, write_jsonl
from helpers import FakeExtractor, snapshot



# 1. export never deletes what --output names, unless it is an earlier export ---------------------

def test_export_refuses_the_run_the_checkpoint_and_the_current_directory(run_copy, tmp_path, monkeypatch, capsys):
    before = snapshot(run_copy)
    best = str(run_copy / "best")
    for output in (str(run_copy), best, str(tmp_path)):
        assert cli(["export", "--model", best, "--output", output]) == 2
    assert "would replace the checkpoint" in capsys.readouterr().err
    work = tmp_path / "work"
    work.mkdir()
    (work / "mine.txt").write_text("keep me")
    monkeypatch.chdir(work)
    assert cli(["export", "--model", best, "--output", "."]) == 2
    assert "would replace the current directory" in capsys.readouterr().err
    assert snapshot(run_copy) == before and (work / "mine.txt").read_text() == "keep me"


def test_export_replaces_an_earlier_export_and_nothing_else(run_copy, tmp_path, capsys):
    best = str(run_copy / "best")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "mine.txt").write_text("keep me")
    assert cli(["export", "--model", best, "--output", str(notes)]) == 2
    assert "holds files that no export of this project wrote" in capsys.readouterr().err
    assert (notes / "mine.txt").read_text() == "keep me"
    target = tmp_path / "export"
    assert cli(["export", "--model", best, "--output", str(target)]) == 0
    assert cli(["export", "--model", best, "--output", str(target) + "/"]) == 0  # the earlier export is replaced
    assert (target / "inference.json").is_file() and not (tmp_path / "export.previous").exists()


# 2. train.py never overwrites a finished run by accident ----------------------------------------

def test_training_into_a_finished_run_is_refused_without_overwrite(tmp_path, capsys):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    before = snapshot(tmp_path / "run")
    assert train_main(["--config", config, "--set", "train.lr=0"]) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert snapshot(tmp_path / "run") == before
    (tmp_path / "run" / "mine.txt").write_text("keep me")
    assert train_main(["--config", config, "--overwrite", "--set", "data.dev="]) == 0
    assert not (tmp_path / "run" / "dev_report.json").exists()  # the old run's files went
    assert (tmp_path / "run" / "mine.txt").read_text() == "keep me"  # the user's did not


# 4. --resume with a changed config or model --------------------------------------------------------

def test_resume_refuses_a_changed_config_and_names_the_keys(tmp_path, capsys):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    before = snapshot(tmp_path / "run")
    assert train_main(["--config", config, "--resume", "--set", "model.head=efficient_global_pointer",
                       "--set", "data.labels=[LOC,ORG,PER,X]"]) == 2
    err = capsys.readouterr().err
    assert "model.head was 'global_pointer', now 'efficient_global_pointer'" in err and "data.labels was" in err
    # forced on, the weights still cannot be loaded into another head: named, not skipped
    assert train_main(["--config", config, "--resume", "--resume-anyway",
                       "--set", "model.head=efficient_global_pointer"]) == 2
    assert "head.bias_dense.weight missing" in capsys.readouterr().err
    assert snapshot(tmp_path / "run") == before


def test_resuming_a_finished_run_adds_no_evaluation(tmp_path, caplog):
    config = tiny_config(tmp_path, train__epochs=1, train__eval_every=4)  # 15 steps: the last is no multiple of 4
    assert train_main(["--config", config]) == 0
    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    with caplog.at_level("INFO", logger="globalpointer"):
        assert train_main(["--config", config, "--resume", "--set", "model.min_score=0.6"]) == 0
    assert list(csv.DictReader(open(tmp_path / "run" / "metrics.csv"))) == rows
    assert "its 1 epoch(s) are done, nothing is left to train" in caplog.text  # not "(epoch 2)"


def test_resume_from_an_empty_weights_file(tmp_path, capsys):
    config = tiny_config(tmp_path, train__epochs=1)
    assert train_main(["--config", config]) == 0
    (tmp_path / "run" / "last" / "model.safetensors").write_bytes(b"")
    assert train_main(["--config", config, "--resume"]) == 2
    assert "last/model.safetensors is corrupted or unreadable" in capsys.readouterr().err


# 5, 9. predict and evaluate outputs ----------------------------------------------------------------

def test_predict_refuses_to_write_over_its_input(trained, tmp_path, capsys):
    texts = tmp_path / "a.txt"
    texts.write_text("张三在北京\n李四\n", encoding="utf-8")
    original = texts.read_bytes()
    os.link(texts, tmp_path / "hard.txt")
    for output in (texts, tmp_path / "." / "a.txt", tmp_path / "hard.txt"):
        assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(texts),
                             "--output", str(output)]) == 2
    assert "is the input" in capsys.readouterr().err and texts.read_bytes() == original


def test_outputs_that_are_directories_fail_before_any_work(trained, tmp_path, capsys):
    model = str(trained / "run" / "best")
    texts = tmp_path / "a.txt"
    texts.write_text("张三\n", encoding="utf-8")
    assert predict_main(["--model", model, "--input", str(texts), "--output", str(tmp_path)]) == 2
    assert evaluate_main(["--model", model, "--data", str(trained / "dev.jsonl"), "--output", str(tmp_path)]) == 2
    assert evaluate_main(["--model", model, "--data", str(trained / "dev.jsonl"),
                          "--output", str(texts / "report.json")]) == 2  # under a file
    assert capsys.readouterr().err.count("is a directory") == 2


def test_output_dir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "taken").write_text("mine")
    assert train_main(["--config", tiny_config(tmp_path, output_dir=str(tmp_path / "taken"))]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert (tmp_path / "taken").read_text() == "mine"


# 6, 9. malformed data is an error naming the line, never records silently dropped ----------------

@pytest.mark.parametrize("content, message", [
    ('[{"text": "a"}]\n{"text": "b"}\n', ":2: text after the JSON array that ends on line 1"),
    ('[{"text": "a"}]\n[{"text": "b"}]\n', ":2: text after the JSON array"),
    ('[{"text": "a"}] trailing\n', ":1: text after the JSON array"),
    ('[{"text": "a"},\n{"text": "b"}\n', ":1: the JSON array opened here is never closed"),
    ('[{"text": "a"}\n{"text": "b"}]\n', ":2: expected ',' or ']'"),
])
def test_json_arrays_must_be_whole(tmp_path, content, message):
    path = tmp_path / "data.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_records(str(path), "auto", on_error="skip")


@pytest.mark.parametrize("record, message", [
    ({"text": "叶老桂来了", "label": {"name": ["叶老桂"]}}, "label 'name' must map each entity text"),
    ({"text": "叶老桂来了", "label": "name"}, "must map types"),
    ({"text": "叶老桂来了", "label": 7}, "must map types"),
    ({"text": "叶老桂来了", "label": {"name": {"叶老桂": "0,2"}}}, "expected a list of \\[start, end\\]"),
    ({"text": "头痛", "entities": ["头痛"]}, "each entity must be an object"),
    ({"text": "头痛", "entities": "头痛"}, '"entities" must be a list'),
])
def test_malformed_entities_are_named_errors_and_skippable(tmp_path, record, message):
    path = tmp_path / "data.json"
    fmt = "cluener" if "label" in record else "jsonl"
    good = {"text": "张三", "label": {"PER": {"张三": [[0, 1]]}}} if fmt == "cluener" else \
        {"text": "张三", "entities": [{"start": 0, "end": 2, "type": "PER"}]}
    write_jsonl(path, [good, record])
    with pytest.raises(DataError, match=f"data.json:2: .*{message}"):
        read_records(str(path), fmt)
    assert len(read_records(str(path), fmt, on_error="skip")) == 1


def test_cmeee_entity_as_a_bare_string(tmp_path):
    path = tmp_path / "cmeee.json"
    path.write_text(json.dumps([{"text": "头痛", "entities": [{"start_idx": 0, "end_idx": 1, "type": "sym"}]},
                                {"text": "头痛", "entities": ["头痛"]}], ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError, match="cmeee.json:1: each entity must be an object with start_idx"):
        read_records(str(path), "cmeee")
    assert len(read_records(str(path), "cmeee", on_error="skip")) == 1


def test_detected_format_is_said_once_per_file(tmp_path, caplog):
    path = tmp_path / "weibo.txt"
    path.write_text("口0\tO\n腔1\tO\n\n", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="globalpointer"):
        records = read_records(str(path))
    # a character and its position in the word (Weibo NER's layout): read as the characters
    assert caplog.text.count("weibo.txt: format chars-position (detected; set data.format") == 1
    assert records[0].text == "口腔"


# 7. a UTF-8 byte order mark -----------------------------------------------------------------------

def test_jsonl_with_a_byte_order_mark_keeps_its_fields():
    sink = io.StringIO()
    data = b'\xef\xbb\xbf{"text": "Paris", "id": 1}\n{"text": "Lyon", "id": 2}\n'
    predict_stream(FakeExtractor(), io.BytesIO(data), PredictionWriter(sink))
    first = json.loads(sink.getvalue().splitlines()[0])
    assert first["text"] == "Paris" and first["id"] == 1 and first["entities"][0]["type"] == "LOC"


# 8. nonsense numbers ------------------------------------------------------------------------------

@pytest.mark.parametrize("override", ["train.lr=nan", "train.lr=inf", "model.min_score=nan", "train.head_lr=.inf"])
def test_non_finite_numbers_are_config_errors(override):
    with pytest.raises(ConfigError, match="expected a finite number"):
        load_config(None, [override])


def test_negative_batch_size_is_refused(trained, capsys):
    with pytest.raises(SystemExit) as stop:
        predict_main(["--model", str(trained / "run" / "best"), "--batch-size", "-1"])
    assert stop.value.code == 2 and "must be 1 or more, got -1" in capsys.readouterr().err


def test_max_length_beyond_the_encoders_positions(trained, tmp_path, capsys):
    assert train_main(["--config", tiny_config(tmp_path, data__max_length=600)]) == 2
    assert "data.max_length=600 exceeds the 512 positions of encoder 'tiny'" in capsys.readouterr().err
    assert not (tmp_path / "run" / "config.yaml").exists()
    assert predict_main(["--model", str(trained / "run" / "best"), "--set", "data.max_length=600"]) == 2


# 9. more user mistakes ----------------------------------------------------------------------------

def test_config_not_in_utf8(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_bytes("output_dir: runs/ü\n".encode("latin-1"))
    assert train_main(["--config", str(path)]) == 2
    assert "config.yaml: not UTF-8 text" in capsys.readouterr().err


def test_corrupted_encoder_directory(tmp_path, capsys):
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text("{not json")
    (encoder / "model_state.pdparams").write_bytes(b"\x80\x04garbage")
    (encoder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    assert train_main(["--config", tiny_config(tmp_path, model__encoder=str(encoder))]) == 2
    assert "cannot build the encoder from its config" in capsys.readouterr().err


# 10. smaller ----------------------------------------------------------------------------------------

def test_truncated_vocabulary_is_noticed(trained, tmp_path):
    copy = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", copy)
    vocab = (copy / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (copy / "vocab.txt").write_text("\n".join(vocab[:len(vocab) // 2]) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match="vocab.txt has .* tokens but the model was trained with"):
        load_checkpoint(str(copy))


def test_ctrl_c_in_predict_says_where_the_partial_output_is(tmp_path):
    class InterruptedExtractor(FakeExtractor):
        def extract(self, texts):
            if self.calls:
                raise KeyboardInterrupt
            return super().extract(texts)

    source = tmp_path / "in.txt"
    source.write_text("Paris\nLyon\nNice\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt, match=r"out.jsonl was not written; the output lines of the first 2 "
                                                r"input lines are in .*out.jsonl.partial-"):
        predict_file(InterruptedExtractor(), str(source), str(tmp_path / "out.jsonl"), lines_per_chunk=2)
    [partial] = tmp_path.glob("out.jsonl.partial-*")
    assert len(partial.read_text().splitlines()) == 2


def test_alignment_warning_suggests_char_mode_only_outside_it(caplog):
    report = AlignmentReport()
    report.unaligned.append("f:1 PER '\u3000张三'")
    with caplog.at_level(logging.WARNING):
        report.log("train", "char")
        report.log("train", "subword")
    char_line, subword_line = caplog.text.splitlines()
    assert "full-width space" in char_line and "tokenization=char" not in char_line
    assert "data.tokenization=char avoids this" in subword_line


def test_a_combining_accent_stays_with_its_letter(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "au", "lait"]))
    encoder = Featurizer(bert_tokenizer(str(vocab)), "subword", 64, 8)
    text = "Cafe\u0301 au lait"
    assert encoder.tokenize(text).offsets == [(0, 5), (6, 8), (9, 13)]


def test_reports_get_the_permissions_open_would_give(tmp_path):
    from globalpointer.files import atomic_write_text

    umask = os.umask(0o022)
    try:
        atomic_write_text(str(tmp_path / "report.html"), "x")
        assert (os.stat(tmp_path / "report.html").st_mode & 0o777) == 0o644
    finally:
        os.umask(umask)
