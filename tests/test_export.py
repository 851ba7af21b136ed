"""Paddle Inference and ONNX exports predict what the dynamic graph predicts."""
import json
import os
import shutil

import numpy as np
import pytest

from globalpointer.model_directory.opening import load_checkpoint, open_model
from globalpointer.cli import main as cli
from globalpointer.cli import evaluate_main, predict_main
from globalpointer.config import load_config
from globalpointer.corpus import featurizer_for
from globalpointer.data.batching import collate
from globalpointer.deploy.export import export_checkpoint
from globalpointer.errors import CheckpointError, ConfigError, UserError
from globalpointer.files import mark_temporary
from globalpointer.model.backends import OnnxModel, OpenVinoModel, PaddleInferenceModel, choose_backend, onnx_providers, paddle_inference_settings
from globalpointer.model.network import model_inputs
from helpers import snapshot


@pytest.fixture(scope="module")
def exported(trained):
    export_dir = trained / "export"
    files = export_checkpoint(str(trained / "run" / "best"), str(export_dir), onnx=True)
    assert {"inference.json", "inference.pdiparams", "model.onnx", "vocab.txt", "labels.json"} <= set(files)
    return export_dir


def batch_of_windows(trained, texts):
    loaded = load_checkpoint(str(trained / "run" / "best"))
    encoder = featurizer_for(loaded.encoder.tokenizer, loaded.trained_for.tokenization,
                             loaded.config.data.max_length, loaded.config.data.window_overlap)
    windows = [w for i, t in enumerate(texts) for w in encoder.windows(i, encoder.tokenize(t))]
    return loaded.network, model_inputs(collate(windows, encoder.pad_id))


TEXTS = ["北京大学的张三在上海", "的一是在不了有" * 12 + "李四", "深圳"]


def test_inference_model_equals_dynamic_graph(trained, exported):
    model, inputs = batch_of_windows(trained, TEXTS)
    expected = model(**inputs).numpy()
    static = PaddleInferenceModel(str(exported), tril_mask=True)(**inputs)
    assert static.shape == expected.shape and expected.shape[0] > 3  # several windows, varying lengths
    np.testing.assert_allclose(static, expected, atol=1e-4)


def test_onnx_equals_dynamic_graph(trained, exported):
    pytest.importorskip("onnxruntime")
    model, inputs = batch_of_windows(trained, TEXTS)
    np.testing.assert_allclose(OnnxModel(str(exported), tril_mask=True)(**inputs), model(**inputs).numpy(),
                               atol=1e-4)


def test_openvino_equals_dynamic_graph(trained, exported):
    pytest.importorskip("openvino")
    from concurrent.futures import ThreadPoolExecutor

    model, inputs = batch_of_windows(trained, TEXTS)
    _, others = batch_of_windows(trained, ["上海的李四", "深圳"])
    with pytest.raises(ConfigError, match="openvino runs on the CPU; on gpu:0 use onnxruntime, paddle-inference"):
        choose_backend("openvino", open_model(str(exported)), device="gpu:0", installed=lambda name: True)
    openvino = OpenVinoModel(str(exported), tril_mask=True, filename="model.onnx")
    first = openvino(**inputs)
    kept = first.copy()
    second = openvino(**others)  # the next pass of the same request leaves the first's logits as they were
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_allclose(first, model(**inputs).numpy(), atol=1e-4)
    with ThreadPoolExecutor(2) as pool:  # a request per thread: concurrent passes do not mix
        both = list(pool.map(lambda feed: openvino(**feed), [inputs, others] * 4))
    for got, expected in zip(both, [first, second] * 4):
        np.testing.assert_allclose(got, expected, atol=1e-6)


@pytest.mark.parametrize("backend", ["auto", "paddle-inference", "onnxruntime", "openvino"])
def test_predict_and_evaluate_through_the_export(trained, exported, tmp_path, backend):
    if backend == "openvino":
        pytest.importorskip("openvino")
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    outputs = {}
    for name, model_dir, extra in (("dynamic", trained / "run" / "best", []),
                                   ("static", exported, ["--backend", backend])):
        target = tmp_path / f"{name}.jsonl"
        assert predict_main(["--model", str(model_dir), "--input", str(source), "--output", str(target)] + extra) == 0
        outputs[name] = [json.loads(line) for line in open(target)]
    for a, b in zip(outputs["dynamic"], outputs["static"]):
        assert [(e["start"], e["end"], e["type"]) for e in a["entities"]] == [(e["start"], e["end"], e["type"]) for e in b["entities"]]
        assert np.allclose([e["score"] for e in a["entities"]], [e["score"] for e in b["entities"]], atol=1e-4)
    assert any(e["text"] == "北京大学" for e in outputs["static"][0]["entities"])
    report = tmp_path / "report.json"
    assert evaluate_main(["--model", str(exported), "--data", str(trained / "dev.jsonl"), "--output", str(report),
                          "--set", f"inference.backend={backend}"]) == 0
    assert json.load(open(report))["micro"]["f1"] == json.load(open(trained / "run" / "summary.json"))["best_dev_f1"]


def test_backend_choice(trained, exported, tmp_path):
    checkpoint = str(trained / "run" / "best")
    no_onnx = tmp_path / "no_onnx"
    export_checkpoint(checkpoint, str(no_onnx))
    assert choose_backend("auto", open_model(checkpoint)) == "dynamic"
    assert choose_backend("auto", open_model(str(exported)), installed=lambda name: True) == "onnxruntime"
    assert choose_backend("auto", open_model(str(exported)), installed=lambda name: name != "onnxruntime") == "paddle-inference"
    assert choose_backend("auto", open_model(str(no_onnx)), installed=lambda name: True) == "paddle-inference"
    assert choose_backend("paddle-inference", open_model(str(exported))) == "paddle-inference"
    with pytest.raises(ConfigError, match="is a checkpoint: globalpointer export"):
        choose_backend("onnxruntime", open_model(checkpoint))
    with pytest.raises(ConfigError, match="needs a checkpoint directory"):
        choose_backend("dynamic", open_model(str(exported)))
    with pytest.raises(ConfigError, match="has no model.onnx; export again: globalpointer export .* --onnx"):
        choose_backend("onnxruntime", open_model(str(no_onnx)))
    with pytest.raises(ConfigError, match="onnxruntime is not installed"):
        choose_backend("onnxruntime", open_model(str(exported)), installed=lambda name: name != "onnxruntime")


def test_gpu_settings_never_fall_back_to_the_cpu():
    assert paddle_inference_settings("cpu", "float32", False) == (-1, False, False)
    assert paddle_inference_settings("gpu:1", "float16", True) == (1, True, True)
    with pytest.raises(ConfigError, match="need a GPU"):
        paddle_inference_settings("cpu", "float16", False)
    assert onnx_providers(False, ["CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    assert onnx_providers(True, ["CUDAExecutionProvider", "CPUExecutionProvider"])[0] == "CUDAExecutionProvider"
    with pytest.raises(ConfigError, match="needs onnxruntime-gpu"):
        onnx_providers(True, ["CPUExecutionProvider"])


def test_corrupted_export_is_a_clear_error(exported, tmp_path):
    broken = tmp_path / "broken"
    os.makedirs(broken)
    for name in os.listdir(exported):
        (broken / name).write_bytes((exported / name).read_bytes())
    (broken / "inference.pdiparams").write_bytes(b"not parameters")
    with pytest.raises(CheckpointError, match="cannot load the exported model"):
        PaddleInferenceModel(str(broken), tril_mask=True)


def test_int8_export_is_smaller_and_predicts_through_onnxruntime(trained, tmp_path, capsys, monkeypatch):
    pytest.importorskip("onnxruntime")
    import onnx

    from globalpointer.cli import main as cli

    target = tmp_path / "int8"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target), "--quantize", "int8",
                        "--verify", str(trained / "dev.jsonl")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{\"model\"")]
    assert [row["model"] for row in rows] == ["float32", "int8"]
    assert rows[1]["megabytes"] < 0.5 * rows[0]["megabytes"]  # int8 weights: a quarter, plus what stays float
    assert rows[1]["f1"] > 90 and abs(rows[1]["f1"] - rows[0]["f1"]) < 5
    int8_ops = [node.op_type for node in onnx.load(str(target / "model.int8.onnx")).graph.node]
    assert int8_ops.count("QAttention") == 2 and "Softmax" not in int8_ops  # the tiny encoder's two layers, fused
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert predict_main(["--model", str(target), "--input", str(source), "--output", str(tmp_path / "out.jsonl"),
                         "--set", "inference.precision=int8"]) == 0
    assert any(e["text"] == "北京大学" for e in json.loads(open(tmp_path / "out.jsonl").readline())["entities"])
    with pytest.raises(ConfigError, match="is a checkpoint: globalpointer export .* --quantize int8$"):
        choose_backend("auto", open_model(str(trained / "run" / "best")), precision="int8")
    assert choose_backend("auto", open_model(str(target)), precision="int8", installed=lambda name: True) == "onnxruntime"
    with pytest.raises(ConfigError, match="has no model.int8.xml; export again: .* --openvino-calibration"):
        choose_backend("openvino", open_model(str(target)), precision="int8", installed=lambda name: True)
    capsys.readouterr()
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(tmp_path / "no"),
                "--openvino-calibration", str(trained / "train.jsonl")]) != 0
    assert "--openvino-calibration makes OpenVINO's INT8 model: add --quantize int8" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    with pytest.raises(UserError, match="--openvino-calibration .*missing.jsonl: no such file"):
        export_checkpoint(str(trained / "run" / "best"), str(tmp_path / "no"), quantize="int8",
                          openvino_calibration=str(tmp_path / "missing.jsonl"))
    assert not (tmp_path / "no").exists()
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "train.jsonl").write_bytes((trained / "train.jsonl").read_bytes())
    with pytest.raises(UserError, match="is inside --output .*keep the texts outside it"):
        export_checkpoint(str(trained / "run" / "best"), str(inside), quantize="int8",
                          openvino_calibration=str(inside / "train.jsonl"))
    assert os.listdir(inside) == ["train.jsonl"]  # the input the export would have replaced is untouched
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nncf" else find_spec(name, *a))
    with pytest.raises(UserError, match=r"needs OpenVINO and NNCF: pip install 'globalpointer\[openvino\]'"):
        export_checkpoint(str(trained / "run" / "best"), str(tmp_path / "no"), quantize="int8",
                          openvino_calibration=str(trained / "train.jsonl"))
    assert not (tmp_path / "no").exists()


def test_verify_refuses_an_int8_model_that_loses_f1_and_keeps_the_float32_export(trained, tmp_path, monkeypatch,
                                                                                  capsys, caplog):
    from globalpointer.deploy import export

    real = export.verify_int8

    def losing(directory, data_path):  # the INT8 model as a CPU that saturates scores it: 2 points below
        rows = real(directory, data_path)
        return [rows[0]] + [{**row, "f1": round(rows[0]["f1"] - 2.0, 2)} for row in rows[1:]]

    monkeypatch.setattr(export, "verify_int8", losing)
    target = tmp_path / "refused"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target), "--quantize", "int8",
                "--verify", str(trained / "dev.jsonl")]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(row["model"], row.get("kept")) for row in rows] == [("float32", None), ("int8", False)]
    said = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(said) == 1 and f"scored dev F1 {rows[1]['f1']:.2f} against float32's {rows[0]['f1']:.2f}" in said[0]
    assert "more than --verify-tolerance 1 points lower: not kept" in said[0] and "\n" not in said[0]
    assert not (target / "model.int8.onnx").exists() and (target / "model.onnx").exists()
    record = json.load(open(target / "export.json"))
    assert "model.int8.onnx" not in record["files"] and "refused" in record["int8"]["onnxruntime"]
    with pytest.raises(ConfigError, match="has no model.int8.onnx"):
        choose_backend("auto", open_model(str(target)), precision="int8", installed=lambda name: True)
    # a tolerance that admits the loss keeps it
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target), "--quantize", "int8",
                "--verify", str(trained / "dev.jsonl"), "--verify-tolerance", "2.5"]) == 0
    assert (target / "model.int8.onnx").exists()


def test_an_int8_model_runs_float32_on_a_cpu_of_other_integer_kernels_unless_told(trained, tmp_path, monkeypatch,
                                                                                  caplog):
    import globalpointer.cpu_math as cpu_math
    from globalpointer.inference.pipeline import load

    target = tmp_path / "int8"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target), "--quantize", "int8",
                "--verify", str(trained / "dev.jsonl")]) == 0
    here = cpu_math.int8_kernels()
    assert json.load(open(target / "export.json"))["int8"]["onnxruntime"]["verified"]["kernels"] == here
    ner = load(str(target), ["inference.precision=int8", "inference.backend=onnxruntime"])
    assert ner.config.inference.precision == "int8" and "model.int8.onnx" in ner.extractor.model.session._model_path
    other = "avx2" if here != "avx2" else "vnni"
    monkeypatch.setattr(cpu_math, "int8_kernels", lambda cpu=None: other)
    caplog.clear()
    ner = load(str(target), ["inference.precision=int8", "inference.backend=onnxruntime"])
    assert ner.config.inference.precision == "float32" and ner.extractor.model.session._model_path.endswith("model.onnx")
    [said] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"model.int8.onnx was verified on a CPU with {here} integer kernels" in said
    assert f"this one has {other}; running float32 (model.onnx) instead" in said
    ner = load(str(target), ["inference.precision=int8", "inference.backend=onnxruntime",
                             "inference.int8_unverified_cpu=int8"])
    assert ner.config.inference.precision == "int8"


@pytest.mark.slow  # quantizes with NNCF
def test_openvino_int8_export_keeps_f1_and_is_chosen_for_int8(trained, tmp_path, capfd):
    pytest.importorskip("openvino")
    pytest.importorskip("nncf")
    from globalpointer.cli import main as cli
    from globalpointer.inference.pipeline import load

    target = tmp_path / "ov"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target), "--quantize", "int8",
                "--openvino-calibration", str(trained / "train.jsonl"), "--verify", str(trained / "dev.jsonl")]) == 0
    out = capfd.readouterr().out.splitlines()
    rows = [json.loads(line) for line in out]  # every line a row: paddle2onnx's and NNCF's output goes to stderr
    assert [(row["model"], row["backend"]) for row in rows] == [("float32", "onnxruntime"), ("int8", "openvino"),
                                                                 ("int8", "onnxruntime")]
    assert rows[1]["f1"] > 90 and abs(rows[1]["f1"] - rows[0]["f1"]) < 5
    assert rows[1]["megabytes"] < 0.5 * rows[0]["megabytes"]
    manifest = json.load(open(target / "export.json"))["files"]
    assert {"model.int8.xml", "model.int8.bin", "model.int8.onnx"} <= set(manifest)
    assert choose_backend("auto", open_model(str(target)), precision="int8", installed=lambda name: True) == "openvino"
    assert choose_backend("auto", open_model(str(target)), precision="int8", installed=lambda name: name != "openvino") == "onnxruntime"
    with pytest.raises(ConfigError, match="OpenVINO is not installed"):
        choose_backend("openvino", open_model(str(target)), precision="int8", installed=lambda name: name != "openvino")
    with pytest.raises(ConfigError, match="runs on openvino or onnxruntime, not paddle-inference"):
        choose_backend("paddle-inference", open_model(str(target)), precision="int8")
    ner = load(str(target), ["inference.precision=int8"])
    assert ner.backend == "openvino"
    assert any(e["text"] == "北京大学" for e in ner(TEXTS[0]))


def test_the_config_offers_the_backends_of_the_table():
    from globalpointer.model.backends import BACKENDS

    assert set(BACKENDS) == {"dynamic", "paddle-inference", "onnxruntime", "openvino"}
    for name in BACKENDS:
        assert load_config(overrides=[f"inference.backend={name}"]).inference.backend == name
    with pytest.raises(ConfigError) as refused:
        load_config(overrides=["inference.backend=tensorflow"])
    assert all(name in str(refused.value) for name in ("auto", *BACKENDS))
    assert [name for name, backend in BACKENDS.items() if not backend.runs_export] == ["dynamic"]


def entity_keys(found):
    return [[(e["start"], e["end"], e["type"]) for e in entities] for entities in found]


def test_export_onto_the_checkpoint_a_kill_left_is_refused(run_copy, capsys):
    """A kill between a save's two renames leaves only best.previous-XXXX, which predict loads: the
    export must not take best/ as a free name and then delete the only checkpoint."""
    best = run_copy / "best"
    best.rename(run_copy / "best.previous-k1ll3d")
    mark_temporary(str(run_copy / "best.previous-k1ll3d"))  # as swap_in_directory marks it
    before = snapshot(run_copy)
    assert cli(["export", "--model", str(best), "--output", str(best)]) == 2
    assert "would replace the checkpoint" in capsys.readouterr().err
    assert snapshot(run_copy) == before


def test_re_export_keeps_files_the_user_added_and_folders_named_like_temporaries(run_copy, tmp_path, capsys):
    target = tmp_path / "export"
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(target)]) == 0
    mine = {"export.partial": "partial", "export.previous": "previous", "export.partial-x": "x"}
    for name, content in mine.items():  # folders of the user's that look like the temporaries of old
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text(content)
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(target)]) == 0  # a clean export: replaced
    (target / "NOTES.txt").write_text("my notes")
    (target / "mydata").mkdir()
    (target / "mydata" / "a.txt").write_text("data")
    before = snapshot(tmp_path)
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(target)]) == 2
    assert "holds files that no export of this project wrote" in capsys.readouterr().err
    assert snapshot(tmp_path) == before
    for name, content in mine.items():
        assert (tmp_path / name / "mine.txt").read_text() == content


def test_export_refuses_another_tools_paddle_model(run_copy, tmp_path, capsys):
    other = tmp_path / "their_model"
    other.mkdir()
    (other / "inference.json").write_text("{}")
    (other / "train_log.txt").write_text("3 days of training")
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(other)]) == 2
    assert "no export of this project wrote" in capsys.readouterr().err
    assert (other / "train_log.txt").read_text() == "3 days of training"


def test_export_of_a_checkpoint_named_like_a_temporary_keeps_it(run_copy, tmp_path):
    checkpoint = tmp_path / "X.partial"
    shutil.copytree(run_copy / "best", checkpoint)
    before = snapshot(checkpoint)
    assert cli(["export", "--model", str(checkpoint), "--output", str(tmp_path / "X")]) == 0
    assert snapshot(checkpoint) == before and (tmp_path / "X" / "inference.json").is_file()


def test_export_does_not_follow_symbolic_links(run_copy, tmp_path, caplog):
    secret = tmp_path / "id_ed25519"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----")
    os.symlink(secret, run_copy / "best" / "README.txt")
    assert cli(["export", "--model", str(run_copy / "best"), "--output", str(tmp_path / "export")]) == 0
    assert not os.path.lexists(tmp_path / "export" / "README.txt")
    assert all(b"OPENSSH" not in content for content in snapshot(tmp_path / "export").values())
    assert "symbolic links not copied into the export: README.txt" in caplog.text


@pytest.mark.parametrize("info", [None, {"packs_texts": 0}, "{not json"])
def test_an_export_whose_export_json_is_missing_or_wrong_still_predicts(trained, tmp_path, info):
    import globalpointer

    target = tmp_path / "export"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target), "--onnx"]) == 0
    if info is None:
        os.remove(target / "export.json")
    else:
        (target / "export.json").write_text(info if isinstance(info, str) else json.dumps(info))
    texts = [json.loads(line)["text"] for line in open(trained / "dev.jsonl", encoding="utf-8")][:20]
    expected = entity_keys(globalpointer.load(str(trained / "run" / "best")).pipe(texts))
    for backend in ("paddle-inference", "onnxruntime"):
        assert entity_keys(globalpointer.load(str(target), backend=backend).pipe(texts)) == expected


def test_a_max_length_beyond_an_exports_positions_is_refused_before_the_work(trained, tmp_path, capsys):
    target = tmp_path / "export"
    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(target)]) == 0
    (tmp_path / "in.txt").write_text("张三\n", encoding="utf-8")
    assert predict_main(["--model", str(target), "--input", str(tmp_path / "in.txt"), "--output",
                         str(tmp_path / "out.jsonl"), "--set", "data.max_length=100000"]) == 2
    assert "exceeds the 512 positions" in capsys.readouterr().err and not (tmp_path / "out.jsonl").exists()


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


def test_export_says_what_it_wrote_not_what_its_libraries_print(trained, tmp_path, capfd):
    """Paddle's static-graph warning and paddle2onnx's progress, naming the temporary folder the export
    is built in, stay out of the command's output; what a library prints when a step fails is kept."""
    from globalpointer.deploy.export import held_library_output

    assert cli(["export", "--model", str(trained / "run" / "best"), "--output", str(tmp_path / "export"),
                "--onnx"]) == 0
    out, err = capfd.readouterr()
    assert "partial" not in out + err and "Paddle2ONNX" not in err and "out tensor" not in err
    assert "model.onnx" in err  # the files written
    with pytest.raises(RuntimeError):
        with held_library_output():
            os.write(2, b"[Paddle2ONNX] Start parsing\nthe reason it failed\n")
            raise RuntimeError
    with held_library_output():
        os.write(1, b"[Paddle2ONNX] Start parsing\nsomething else\n")
    assert capfd.readouterr().err == "[Paddle2ONNX] Start parsing\nthe reason it failed\nsomething else\n"


def test_openvino_calibration_reads_labelled_files_and_plain_texts(tmp_path):
    """A file of plain texts (predict's input) was refused as CoNLL ("expected a token and a tag")."""
    from globalpointer.deploy.export import calibration_texts_of

    plain = tmp_path / "texts.txt"
    plain.write_text("北京大学的张三在上海\n\n李四 去了 广州\nhello world again\n", encoding="utf-8")
    assert calibration_texts_of(str(plain)) == ["北京大学的张三在上海", "李四 去了 广州", "hello world again"]
    tagged = tmp_path / "train.bio"
    tagged.write_text("张\tB-PER\n三\tI-PER\n\n北\tB-LOC\n京\tI-LOC\n", encoding="utf-8")
    assert calibration_texts_of(str(tagged)) == ["张三", "北京"]
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    with pytest.raises(UserError, match="no texts to calibrate on"):
        calibration_texts_of(str(tmp_path / "empty.txt"))
