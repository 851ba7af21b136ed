"""model_directory/: what a checkpoint's config.yaml records (what the model is, not how it is run)."""
import json
import math
import os
import shutil
import sys

import pytest
import yaml

from globalpointer.model_directory.opening import load_checkpoint, open_model
from globalpointer.cli import main as cli
from globalpointer.cli import evaluate_main, predict_main
from globalpointer.config import InferenceConfig, RUN_TIME_KEYS, ServeConfig
from globalpointer.errors import CheckpointError
from globalpointer.files import mark_temporary
from helpers import unrecorded


def test_a_checkpoint_records_what_the_model_is_not_how_it_is_served(trained, tmp_path):
    checkpoint = trained / "run" / "best"
    saved = yaml.safe_load((checkpoint / "config.yaml").read_text(encoding="utf-8"))
    assert {"data", "model", "train"} <= set(saved) and not set(RUN_TIME_KEYS) & set(saved)
    config = open_model(str(checkpoint)).run_config(["serve.port=8123", "inference.batch_size=5"])
    assert (config.serve.port, config.inference.batch_size) == (8123, 5)


def test_an_older_checkpoints_run_time_sections_are_left_to_the_defaults(trained, tmp_path):
    """Versions before this one froze inference and serve into every checkpoint; they load, and how
    they run comes from the defaults and --set, as for a new checkpoint."""
    old = tmp_path / "old"
    shutil.copytree(trained / "run" / "best", old)
    unrecorded(old)  # as those versions wrote it
    with open(old / "config.yaml", "a", encoding="utf-8") as out:
        out.write("inference:\n  batch_size: 3\n  backend: onnxruntime\nserve:\n  port: 1234\n")
    config = open_model(str(old)).run_config()
    assert config.serve == ServeConfig() and config.inference == InferenceConfig()
    assert open_model(str(old)).run_config(["serve.port=1234"]).serve.port == 1234


@pytest.mark.parametrize("labels, message", [(["LOC", "PER", "LOC", "ORG"], "names LOC more than once"),
                                             (["LOC", "", "PER"], "labels.json is corrupted")])
def test_labels_json_with_a_repeated_or_empty_type(run_copy, labels, message):
    (run_copy / "best" / "labels.json").write_text(json.dumps(labels))
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(str(run_copy / "best"))


@pytest.mark.parametrize("value, message", [("-1e308", "min_scores must be JSON numbers"),
                                            (True, "min_scores must be JSON numbers"),
                                            (0.0, "one minimum score between 0 and 1"),
                                            (1.0, "one minimum score between 0 and 1"),
                                            (float("nan"), "one minimum score between 0 and 1")])
def test_calibrated_min_scores_must_be_probabilities(run_copy, value, message):
    from globalpointer.model_directory.opening import read_min_scores

    labels = json.loads((run_copy / "best" / "labels.json").read_text())
    scores = {label: 0.5 for label in labels}
    scores[labels[0]] = value
    (run_copy / "best" / "thresholds.json").write_text(json.dumps({"min_scores": scores}))
    with pytest.raises(CheckpointError, match=message):
        read_min_scores(str(run_copy / "best"), labels)


def test_an_older_thresholds_file_of_logits_reads_as_the_scores_they_mean(run_copy):
    from globalpointer.model_directory.opening import read_min_scores

    labels = json.loads((run_copy / "best" / "labels.json").read_text())
    logits = [(0.0, 2.0, -1.5)[index % 3] for index in range(len(labels))]
    path = run_copy / "best" / "thresholds.json"
    path.write_text(json.dumps({"thresholds": dict(zip(labels, logits))}))
    assert read_min_scores(str(run_copy / "best"), labels) == pytest.approx([1 / (1 + math.exp(-x)) for x in logits],
                                                                            rel=1e-12)
    path.write_text(json.dumps({"thresholds": dict(zip(labels, [1e6] + logits[1:]))}))
    with pytest.raises(CheckpointError, match="between 0 and 1"):  # no probability below 1 means it
        read_min_scores(str(run_copy / "best"), labels)


def test_truncated_vocabulary_is_noticed(trained, tmp_path):
    copy = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", copy)
    vocab = (copy / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (copy / "vocab.txt").write_text("\n".join(vocab[:len(vocab) // 2]) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"vocab.txt is [\d,]+ bytes where [\d,]+ were written \(checkpoint.json "
                                              r"records it\): the file is truncated"):
        load_checkpoint(str(copy))
    unrecorded(copy)  # a model of an earlier version: the vocabulary's own count says it
    with pytest.raises(CheckpointError, match="vocab.txt has .* tokens but the model was trained with"):
        load_checkpoint(str(copy))


def every_file(directory):
    return sorted(name for name in os.listdir(directory) if name not in ("checkpoint.json", "export.json"))


@pytest.mark.parametrize("damage", ["emptied", "truncated"])
def test_any_file_of_a_model_directory_damaged_is_refused_in_one_line_by_every_reader(trained, tmp_path, capsys,
                                                                                       damage):
    """Each file a checkpoint or an export holds, emptied or cut in half, is refused before any work in
    one line naming it, by predict, evaluate, globalpointer.load and serve alike."""
    import globalpointer

    export = tmp_path / "export"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(export), "--onnx"]) == 0
    for source in (trained / "run" / "best", export):
        names = every_file(source)
        assert "config.yaml" in names and ("model.safetensors" in names or "model.onnx" in names)
        for name in names:
            copy = tmp_path / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(source, copy)
            content = (copy / name).read_bytes()
            (copy / name).write_bytes(b"" if damage == "emptied" else content[:len(content) // 2])
            said = f"{copy / name} is {'emptied' if damage == 'emptied' else ''}"
            if name == "thresholds.json":  # not sized: calibrate rewrites it; its reader checks it whole
                with pytest.raises(CheckpointError, match="thresholds.json"):
                    globalpointer.load(str(copy))
                continue
            with pytest.raises(CheckpointError) as error:
                globalpointer.load(str(copy))
            assert str(error.value).startswith(said) and "\n" not in str(error.value), error.value
            capsys.readouterr()
            assert predict_main(["--model", str(copy), "--input", "-"]) == 2
            assert evaluate_main(["--model", str(copy), "--data", str(trained / "dev.jsonl")]) == 2
            assert cli(["serve", "--model", str(copy), "--port", "0"]) == 2
            errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
            assert len(errors) == 3 and all(said in line for line in errors), errors


def test_any_file_altered_at_its_size_is_refused_naming_it(trained, tmp_path, capsys):
    """The record holds each file's SHA-256 as well as its size: a file rewritten at its byte size (labels.json
    in another order, a byte of the weights changed) is refused before any work in one line naming it, by
    globalpointer.load for every file of a checkpoint and an export, and by predict, evaluate and serve."""
    import globalpointer

    export = tmp_path / "export"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(export), "--onnx"]) == 0
    for source in (trained / "run" / "best", export):
        for name in every_file(source):
            if name == "thresholds.json":  # calibrate rewrites it in place; its reader checks it whole
                continue
            copy = tmp_path / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(source, copy)
            content = (copy / name).read_bytes()
            middle = len(content) // 2
            (copy / name).write_bytes(content[:middle] + bytes([content[middle] ^ 1]) + content[middle + 1:])
            with pytest.raises(CheckpointError) as error:
                globalpointer.load(str(copy))
            said = f"{copy / name} is not the file "
            assert str(error.value).startswith(said) and "\n" not in str(error.value), error.value
    copy = tmp_path / "reordered"
    shutil.copytree(trained / "run" / "best", copy)
    labels = json.loads((copy / "labels.json").read_text(encoding="utf-8"))
    (copy / "labels.json").write_text(json.dumps(labels[::-1], ensure_ascii=False, indent=1), encoding="utf-8")
    assert (copy / "labels.json").stat().st_size == (trained / "run" / "best" / "labels.json").stat().st_size
    capsys.readouterr()
    assert predict_main(["--model", str(copy), "--input", "-"]) == 2
    assert evaluate_main(["--model", str(copy), "--data", str(trained / "dev.jsonl")]) == 2
    assert cli(["serve", "--model", str(copy), "--port", "0"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 3 and all(f"{copy / 'labels.json'} is not the file checkpoint.json records" in line
                                    for line in errors), errors


def test_a_relation_models_types_reordered_at_their_size_are_refused(relation_run, tmp_path):
    """relations.json in another order, at its byte size, would name every triple's relation wrongly."""
    import globalpointer

    copy = tmp_path / "best"
    shutil.copytree(relation_run / "run" / "best", copy)
    relations = json.loads((copy / "relations.json").read_text(encoding="utf-8"))
    size = (copy / "relations.json").stat().st_size
    (copy / "relations.json").write_text(json.dumps(relations[::-1], ensure_ascii=False, indent=1), encoding="utf-8")
    assert relations[::-1] != relations and (copy / "relations.json").stat().st_size == size
    with pytest.raises(CheckpointError, match=rf"^{copy / 'relations.json'} is not the file checkpoint.json records"):
        globalpointer.load(str(copy))


def test_a_file_put_into_a_model_directory_is_refused_or_never_read(trained, tmp_path):
    """A relations.json added to an entity model's folder is refused naming it (not blamed on the weights);
    a link or a pipe where the record lists a file is refused naming it, without waiting on the pipe; a
    file no reader opens is left alone."""
    import globalpointer

    best = trained / "run" / "best"
    copy = tmp_path / "best"
    shutil.copytree(best, copy)
    (copy / "README.md").write_text("notes of the user\n", encoding="utf-8")
    assert globalpointer.load(str(copy))("北京") is not None  # what no reader opens changes nothing
    assert cli(["export", "--model", str(copy), "--output", str(tmp_path / "export")]) == 0
    assert not (tmp_path / "export" / "README.md").exists()  # nor is it shipped: an export holds the model
    (copy / "relations.json").write_text(json.dumps(["出生地"]), encoding="utf-8")
    with pytest.raises(CheckpointError, match=rf"^{copy / 'relations.json'} is not among the files checkpoint.json "
                                              rf"records: it was put there after"):
        globalpointer.load(str(copy))
    (copy / "relations.json").unlink()
    outside = tmp_path / "vocab.txt"
    shutil.move(copy / "vocab.txt", outside)
    os.symlink(outside, copy / "vocab.txt")
    with pytest.raises(CheckpointError, match=rf"^{copy / 'vocab.txt'} is a link: a model directory holds"):
        globalpointer.load(str(copy))
    (copy / "vocab.txt").unlink()
    shutil.move(outside, copy / "vocab.txt")
    (copy / "labels.json").unlink()
    os.mkfifo(copy / "labels.json")
    with pytest.raises(CheckpointError, match=rf"^{copy / 'labels.json'} is not a regular file"):
        globalpointer.load(str(copy))
    unrecorded(copy)  # a model of an earlier version, which lists nothing: the pipe is not read either
    with pytest.raises(CheckpointError, match=rf"^{copy / 'labels.json'} is not a regular file"):
        globalpointer.load(str(copy))
    (copy / "labels.json").unlink()
    shutil.copy(trained / "run" / "best" / "labels.json", copy / "labels.json")
    shutil.move(copy / "checkpoint.json", tmp_path / "checkpoint.json")  # the record itself, a link out
    os.symlink(tmp_path / "checkpoint.json", copy / "checkpoint.json")
    with pytest.raises(CheckpointError, match=rf"^{copy / 'checkpoint.json'} is a link: a model directory holds"):
        globalpointer.load(str(copy))


def test_a_service_copies_and_hashes_the_recorded_files_alone(trained, tmp_path, monkeypatch):
    """A pipe, a link loop and a link to /dev/zero beside a model's files: the service's digest, its watch
    of the directory and its copy read the files the record lists (and thresholds.json), finish, and
    copy nothing else."""
    import threading

    from globalpointer.model_directory.layout import model_file_names
    from globalpointer.model_directory.served import DirectoryWatch, ServedCopy, content_digest, directory_status

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", model)
    digest = content_digest(str(model))
    os.mkfifo(model / "pipe")
    os.symlink(".", model / "again")
    os.symlink("/dev/zero", model / "zeros")
    done = {}

    def read_it():
        status = directory_status(str(model))
        with ServedCopy(str(model)) as copy:
            done["copied"] = sorted(os.listdir(copy.path))
            done["digests"] = (content_digest(str(model)), copy.digest)
        done["state"] = DirectoryWatch(str(model), digest, status).state()

    reader = threading.Thread(target=read_it, daemon=True)
    reader.start()
    reader.join(120)
    assert not reader.is_alive(), "the service's reading of the directory waited on the pipe or the links"
    recorded = model_file_names(str(model))
    assert "checkpoint.json" in recorded and "model.safetensors" in recorded
    assert done["copied"] == recorded and not {"pipe", "again", "zeros", "README.md"} & set(recorded)
    assert done["digests"] == (digest, digest) and done["state"] == "unchanged"


def test_truncated_weights(checkpoint_copy):
    weights = checkpoint_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="model.safetensors is corrupted or unreadable"):
        load_checkpoint(str(checkpoint_copy))


def test_corrupted_labels_and_missing_files(checkpoint_copy, capsys):
    (checkpoint_copy / "labels.json").write_text("{oops")
    with pytest.raises(CheckpointError, match="labels.json is corrupted"):
        load_checkpoint(str(checkpoint_copy))
    (checkpoint_copy / "vocab.txt").unlink()
    assert predict_main(["--model", str(checkpoint_copy), "--input", "-"]) == 2
    assert "not a complete checkpoint, missing vocab.txt" in capsys.readouterr().err


def test_weights_of_another_model(checkpoint_copy, trained):
    labels = json.loads((checkpoint_copy / "labels.json").read_text())
    (checkpoint_copy / "labels.json").write_text(json.dumps(labels + ["EXTRA"]))
    with pytest.raises(CheckpointError, match=r"does not match the model built from its config.yaml and labels.json.*"
                                              r"head.dense.weight is \[64, 96\] in the file but \[64, 128\]"):
        load_checkpoint(str(checkpoint_copy))


def test_interrupted_save_falls_back_to_previous(checkpoint_copy, trained, tmp_path):
    """A kill between the two renames of a checkpoint save leaves DIR.previous-XXXX: loading finds it."""
    previous = tmp_path / "best.previous-k1ll3d"
    checkpoint_copy.rename(previous)
    mark_temporary(str(previous))  # as swap_in_directory marks it
    loaded = load_checkpoint(str(checkpoint_copy))
    assert loaded.directory == str(previous)
    assert evaluate_main(["--model", str(checkpoint_copy), "--data", str(trained / "dev.jsonl")]) == 0


def test_a_model_directory_of_a_later_format_is_refused(checkpoint_copy, tmp_path):
    import globalpointer

    info = json.loads((checkpoint_copy / "checkpoint.json").read_text())
    assert info["format_version"] == 1
    (checkpoint_copy / "checkpoint.json").write_text(json.dumps({**info, "format_version": 2}))
    with pytest.raises(CheckpointError, match="format_version 2, but this globalpointer reads up to 1"):
        load_checkpoint(str(checkpoint_copy))
    (checkpoint_copy / "checkpoint.json").write_text(json.dumps(info))
    export = tmp_path / "export"
    assert cli(["export", "--model", str(checkpoint_copy), "--output", str(export)]) == 0
    manifest = json.loads((export / "export.json").read_text())
    assert manifest["format_version"] == 1 and "inference.json" in manifest["files"]
    (export / "export.json").write_text(json.dumps({**manifest, "format_version": 7}))
    with pytest.raises(CheckpointError, match="export.json: format_version 7"):
        globalpointer.load(str(export))


def test_a_checkpoint_of_the_pickle_era_is_refused_in_one_line(checkpoint_copy, capsys):
    """Checkpoints before safetensors kept their weights in model_state.pdparams; this version reads
    model.safetensors only, and says which file it missed."""
    (checkpoint_copy / "model.safetensors").rename(checkpoint_copy / "model_state.pdparams")
    assert predict_main(["--model", str(checkpoint_copy), "--input", "-"]) == 2
    err = capsys.readouterr().err
    assert "missing model.safetensors" in err and err.count("\n") == 1


def test_a_checkpoint_is_hashed_once_while_its_files_are_unchanged(checkpoint_copy, tmp_path, monkeypatch):
    """Compiling and loading both ask for the checkpoint's digest, and so does every later process:
    the weights are read once, and again only after a write."""
    from globalpointer.model_directory import digests

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    reads = []
    real = digests.hash_file
    monkeypatch.setattr(digests, "hash_file", lambda path: reads.append(path) or real(path))
    first = open_model(str(checkpoint_copy)).digest
    assert open_model(str(checkpoint_copy)).digest == first
    weights = str(checkpoint_copy / "model.safetensors")
    assert reads.count(weights) == 1
    monkeypatch.setattr(digests, "_FILE_DIGESTS", {})  # as a new process: the cache remembers it
    assert open_model(str(checkpoint_copy)).digest == first and reads.count(weights) == 1
    content = open(weights, "rb").read()
    with open(weights, "wb") as out:  # the same bytes, written again: read again, the same digest
        out.write(content)
    assert open_model(str(checkpoint_copy)).digest == first and reads.count(weights) == 2
    (checkpoint_copy / "labels.json").write_text(json.dumps(list(reversed(open_model(str(checkpoint_copy))
                                                                          .trained_for.labels))))
    assert open_model(str(checkpoint_copy)).digest != first  # what the outputs mean is part of it


OPENED = []  # the files of the directory under test opened while it is set (an audit hook cannot be removed)


def _count_opens(event, args):
    if event == "open" and OPENED and isinstance(args[0], str) and args[0].startswith(OPENED[0]):
        OPENED.append(os.path.basename(args[0]))


sys.addaudithook(_count_opens)


@pytest.mark.parametrize("cached", [False, True])
def test_load_and_a_first_call_open_every_file_of_the_model_once(checkpoint_copy, tmp_path, monkeypatch, cached):
    """Config, types, tokenizer, architecture and weights: each file read once by load and the first
    call (they were read up to three times, and the weights hashed on every load); with a compiled
    program in the cache, the checkpoint's weights are not read, only hashed (once, then remembered)."""
    import globalpointer
    from globalpointer.deploy.export import compile_if_it_pays

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    if cached:
        compile_if_it_pays(str(checkpoint_copy), [], None, lines=10 ** 6)
    OPENED[:] = [str(checkpoint_copy) + os.sep]
    try:
        ner = globalpointer.load(str(checkpoint_copy))
        ner("北京大学的张三")
    finally:
        opened, OPENED[:] = OPENED[1:], []
    assert ner.backend == ("paddle-inference" if cached else "dynamic")
    assert sorted(set(opened)) == sorted(opened), opened
    assert {"config.yaml", "labels.json", "checkpoint.json", "config.json", "vocab.txt"} <= set(opened)


def test_predict_resolves_the_model_directory_once(checkpoint_copy, tmp_path, monkeypatch):
    """Compiling and loading get the directory predict resolved, not the path again."""
    from globalpointer.model_directory import layout

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))  # its program serves no other test

    calls = []
    real = layout.resolve_checkpoint
    monkeypatch.setattr(layout, "resolve_checkpoint", lambda path: calls.append(path) or real(path))
    (tmp_path / "in.txt").write_text("北京大学的张三\n", encoding="utf-8")
    assert predict_main(["--model", str(checkpoint_copy), "--input", str(tmp_path / "in.txt"), "--output",
                         str(tmp_path / "out.jsonl"), "--set", "inference.compile_from_lines=1"]) == 0
    assert calls == [str(checkpoint_copy)]


def test_export_resolves_the_checkpoint_once_and_refuses_an_export(checkpoint_copy, tmp_path, monkeypatch, capsys):
    from globalpointer.model_directory import layout

    calls = []
    real = layout.resolve_checkpoint
    monkeypatch.setattr(layout, "resolve_checkpoint", lambda path: calls.append(path) or real(path))
    assert cli(["export", "--model", str(checkpoint_copy), "--output", str(tmp_path / "export")]) == 0
    assert calls == [str(checkpoint_copy)]
    capsys.readouterr()
    assert cli(["export", "--model", str(tmp_path / "export"), "--output", str(tmp_path / "again")]) == 2
    assert "is an export already; export its checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "again").exists()


def test_a_thresholds_file_nested_past_the_parser_is_one_line(tmp_path):
    """A thresholds.json nested 100,000 deep was a RecursionError traceback."""
    from globalpointer.model_directory.layout import THRESHOLDS
    from globalpointer.model_directory.opening import read_min_scores
    from globalpointer.errors import CheckpointError

    (tmp_path / THRESHOLDS).write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(CheckpointError, match="nested too deeply"):
        read_min_scores(str(tmp_path), ["PER"])


def test_an_opened_model_builds_its_network_as_often_as_asked(checkpoint_copy):
    """A command hands one opened directory to compiling and then to loading: building the encoder
    from its architecture must leave the architecture as read (PaddleNLP's from_dict pops its keys)."""
    import copy

    opened = open_model(str(checkpoint_copy))
    architecture = copy.deepcopy(opened.architecture)
    first = load_checkpoint(opened).network.state_dict()
    second = load_checkpoint(opened).network.state_dict()
    assert opened.architecture == architecture and list(first) == list(second)


DEEP = "[" * 100000 + "]" * 100000  # past Python's parser: a RecursionError, not a JSONDecodeError


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "labels.json", "checkpoint.json"])
def test_a_model_file_nested_past_the_parser_is_one_line(checkpoint_copy, name):
    (checkpoint_copy / name).write_text(DEEP)
    with pytest.raises(CheckpointError, match=f"{name} is corrupted"):
        open_model(str(checkpoint_copy))


def test_every_other_json_a_model_directory_holds_is_read_within_the_parsers_depth(checkpoint_copy, tmp_path):
    """An export's program and manifest, a trainer state, safetensors metadata, a tokenizer.json."""
    from globalpointer.errors import EncoderError
    from globalpointer.files import replaceable
    from globalpointer.model.backends import program_input_dtype
    from globalpointer.model.encoders import vocab_from_tokenizer_json
    from globalpointer.model.weights import TREE_KEY, load_state

    (tmp_path / "inference.json").write_text(DEEP)
    with pytest.raises(CheckpointError, match="inference.json cannot be read \\(nested too deeply\\)"):
        program_input_dtype(str(tmp_path / "inference.json"), "span_text")
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "export.json").write_text(DEEP)
    assert not replaceable(str(tmp_path / "export"), "export.json")
    (tmp_path / "tokenizer.json").write_text(DEEP)
    with pytest.raises(EncoderError, match="nested too deeply"):
        vocab_from_tokenizer_json(str(tmp_path / "tokenizer.json"))
    from safetensors.numpy import save_file
    import numpy as np

    save_file({"x": np.zeros(2, dtype="float32")}, str(tmp_path / "deep.safetensors"),
              metadata={TREE_KEY: '{"a": ' * 50000 + "1" + "}" * 50000})
    with pytest.raises(CheckpointError, match="its metadata does not describe its tensors"):
        load_state(str(tmp_path / "deep.safetensors"))


@pytest.mark.parametrize("backend", ["paddle-inference", "onnxruntime"])
def test_load_and_a_first_call_open_every_file_of_an_export_once(checkpoint_copy, tmp_path, backend):
    """An export's files too: export.json read once (whether it packs texts, with its format version),
    and the program left to the backend's own loader (it was parsed a second time for its input dtype)."""
    import globalpointer
    from globalpointer.deploy.export import export_checkpoint

    export = tmp_path / "export"
    export_checkpoint(str(checkpoint_copy), str(export), onnx=backend == "onnxruntime")
    OPENED[:] = [str(export) + os.sep]
    try:
        ner = globalpointer.load(str(export), backend=backend)
        ner("北京大学的张三")
    finally:
        opened, OPENED[:] = OPENED[1:], []
    assert ner.backend == backend and ner.extractor.pack_texts
    assert sorted(set(opened)) == sorted(opened), opened
    assert "export.json" in opened and "inference.json" not in opened
