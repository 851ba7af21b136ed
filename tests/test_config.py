import re

import pytest
import yaml

from globalpointer.cli import predict_main, train_main
from globalpointer.config import RunConfig, dump_config, flatten_config, load_config, require_files
from globalpointer.errors import ConfigError


def write(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults_are_all_visible_and_round_trip():
    text = dump_config(RunConfig())
    tree = yaml.safe_load(text)
    assert tree["model"]["encoder"] == "auto" and tree["train"]["lr"] == "auto"
    assert "# peak learning rate of the encoder" in text and "auto: 1e-3 for a relation model" in text
    assert load_config(base=tree) == RunConfig()


def test_yaml_then_overrides(tmp_path):
    path = write(tmp_path, "model:\n  head: efficient_global_pointer\ntrain:\n  lr: 3e-5\n")
    config = load_config(path, ["train.epochs=7", "model.rope=false", "data.labels=[a, b]", "train.lr=2e-5"])
    assert config.model.head == "efficient_global_pointer"
    assert config.train.epochs == 7 and config.model.rope is False and config.data.labels == ["a", "b"]
    assert config.train.lr == pytest.approx(2e-5)
    assert load_config(path).train.lr == pytest.approx(3e-5)  # YAML reads 3e-5 as a string; accepted as a number


@pytest.mark.parametrize("override, message", [
    ("train.lrr=1", "did you mean 'train.lr'"),
    ("modle.head=x", "did you mean 'model'"),
    ("train.epochs=two", "train.epochs: expected a whole number"),
    ("model.rope=maybe", "model.rope: expected true or false"),
    ("model.head=crf", "model.head: 'crf' is not one of"),
    ("train.batch_size=0", "train.batch_size must be > 0, got 0"),
    ("data.max_length=-5", "data.max_length must be >= 3, got -5"),
    ("data.window_overlap=200", "window_overlap"),
    ("model.head_size=63", "even"),
    ("train.rdrop_alpha=0.1", r"train.rdrop_alpha was removed: R-Drop lost F1 on nearly every seed \(docs/results.md\); "
                              r"this one says '0.1': remove the key"),
    ("model.lexicon=jieba", "model.lexicon was removed: jieba's lexicon features were level"),
    ("model.context=bilstm", "model.context was removed: the context layers lost or were level"),
    ("train.ema_decay=0.999", "train.ema_decay was removed: the average of the weights lost"),
    ("model.head=crf_tagger", r"model.head=crf_tagger was removed: the BIO token-classification baselines were "
                              r"5-15 F1 behind GlobalPointer .*\(docs/results.md\); a model trained with it: train it"),
    ("model.pair_rope=false", r"model.pair_rope was removed: RoPE in the pair heads was ahead .* this one says "
                              r"'False': remove the key \(from an entity model's config.yaml too, which has no pair "
                              r"heads; a relation model trained with it: train it again\)"),
    ("inference.pack_texts=false", r"inference.pack_texts was removed: a row per window was level .* this one says "
                                   r"'False': remove the key \(from a model's config.yaml too\)"),
    ("train.boundary_smoothing=1", "train.boundary_smoothing must be >= 0 and < 1, got 1.0"),
    ("train.boundary_smoothing_size=0", "train.boundary_smoothing_size must be > 0, got 0"),
    ("train", "expected KEY=VALUE"),
])
def test_errors_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=override.split(","))


def test_yaml_syntax_error_has_line_number(tmp_path):
    path = write(tmp_path, "data:\n  train: a.json\n model: [\n")
    with pytest.raises(ConfigError, match=r"run.yaml:3"):
        load_config(path)


def test_unknown_key_in_file_names_file(tmp_path):
    path = write(tmp_path, "train:\n  epoch: 3\n")
    with pytest.raises(ConfigError, match=r"'train.epoch'; did you mean 'train.epochs'\?.*run.yaml"):
        load_config(path)


def test_missing_files_are_reported_before_work(tmp_path):
    config = load_config(overrides=[f"data.train={tmp_path}/nope.json"])
    with pytest.raises(ConfigError, match="data.train: file not found"):
        require_files(config, ["train"])
    with pytest.raises(ConfigError, match="data.train is empty"):
        require_files(load_config(), ["train"])
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(str(tmp_path / "missing.yaml"))


def test_every_shipped_config_loads():
    import glob

    paths = glob.glob("configs/*.yaml")
    assert paths
    for path in paths:
        load_config(path)


@pytest.mark.parametrize("old, new, value, other", [("train.eval_batch_size", "inference.batch_size", 12, 7),
                                                     ("model.calibrated_thresholds", "model.use_calibration", False, True),
                                                     ("inference.compile_from", "inference.compile_from_lines", 9, 3)])
def test_a_renamed_key_still_loads_under_its_new_name(tmp_path, caplog, old, new, value, other):
    """Configs and checkpoints that use a key's earlier name load, with a warning naming the new
    one; the new name wins when both are set."""
    (section, key), (new_section, new_key) = old.split("."), new.split(".")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({section: {key: value}}), encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert getattr(getattr(load_config(str(path)), new_section), new_key) == value
    assert f"{old} is now {new}" in caplog.text and str(path) in caplog.text
    assert getattr(getattr(load_config(str(path), [f"{new}={other}"]), new_section), new_key) == other
    assert getattr(getattr(load_config(overrides=[f"{old}={other}"]), new_section), new_key) == other
    assert f" {key}:" not in dump_config(load_config(str(path)))


def test_model_threshold_became_min_score_a_probability(tmp_path):
    """Users think in the probabilities every entity shows: model.min_score; model.threshold (a
    logit) typed on the command line is an error naming the new key and the value it meant."""
    with pytest.raises(ConfigError, match=r"model.threshold=2.0 is model.min_score=0.880797"):
        load_config(overrides=["model.threshold=2.0"])
    for wrong in ("0", "1", "1.5", "-0.1"):
        with pytest.raises(ConfigError, match=r"model.min_score must be > 0 and < 1, .*between 0 and 1"):
            load_config(overrides=[f"model.min_score={wrong}"])
    assert load_config().model.min_score == 0.5
    path = tmp_path / "old.yaml"
    path.write_text("model:\n  threshold: 0.0\n", encoding="utf-8")
    assert load_config(str(path)).model.min_score == 0.5
    assert "  threshold:" not in dump_config(load_config(str(path)))


def number_keys():
    import dataclasses

    from globalpointer.config import RunConfig
    from globalpointer.config.schema import NumberOrAuto

    def walk(cls, prefix):
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(f.type):
                yield from walk(f.type, f"{prefix}{f.name}.")
            elif f.type in (int, float, NumberOrAuto):
                yield prefix + f.name, int if f.type is int else float, f.metadata.get("bounds")

    return list(walk(RunConfig, ""))


@pytest.mark.parametrize("key, kind, bounds", number_keys())
def test_every_number_key_declares_its_range_and_refuses_what_is_outside(key, kind, bounds):
    assert bounds is not None, f"{key} has no bounds beside it"
    outside = []
    if bounds.low is not None:
        outside.append(bounds.low - 1 if bounds.low_included else bounds.low)
    if bounds.high is not None:
        outside.append(bounds.high + 1 if bounds.high_included else bounds.high)
    for value in outside:
        value = int(value) if kind is int else value
        with pytest.raises(ConfigError, match=rf"^--set {re.escape(key)}=\S+: {re.escape(key)} must be "):
            load_config(overrides=[f"{key}={value}"])
    if kind is int:  # any whole number YAML reads: never a traceback from Paddle or numpy later
        with pytest.raises(ConfigError, match=f"--set {re.escape(key)}=.*(64-bit|must be)"):
            load_config(overrides=[f"{key}={10 ** 30}"])


@pytest.mark.parametrize("key", ["train.lr", "model.dropout"])
def test_a_number_key_with_auto_takes_auto_or_a_number_and_nothing_else(key):
    assert flatten_config(load_config(overrides=[f"{key}=auto"]))[key] == "auto"
    assert flatten_config(load_config(overrides=[f"{key}=0.25"]))[key] == 0.25
    with pytest.raises(ConfigError, match=rf"^--set {re.escape(key)}=Auto: {re.escape(key)}: expected a number or "
                                          rf"auto, got 'Auto'$"):
        load_config(overrides=[f"{key}=Auto"])


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path):
    """RELIABILITY: attack 4, case 13."""
    path = tmp_path / "twice.yaml"
    path.write_text("train:\n  epochs: 2\ndata:\n  train: a.jsonl\ntrain:\n  lr: 9.0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"twice.yaml:5: 'train' is written twice, on lines 1 and 5"):
        load_config(str(path))
    path.write_text("train:\n  epochs: 2\n  lr: 1e-5\n  epochs: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'epochs' is written twice, on lines 2 and 4"):
        load_config(str(path))
    path.write_text("base: &base\n  epochs: 2\ntrain:\n  <<: *base\n  epochs: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown config key 'base'"):  # a merge may be overridden: no duplicate
        load_config(str(path))


def test_a_bad_value_from_set_is_blamed_on_set_not_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("train:\n  epochs: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^--set train.lr=abc: train.lr: expected a number or auto, got 'abc'$"):
        load_config(str(path), ["train.lr=abc"])
    path.write_text("train:\n  epochs: two\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"train.epochs: expected a whole number, got 'two' \(in .*run.yaml\)"):
        load_config(str(path), ["train.lr=1e-5"])
    with pytest.raises(ConfigError, match=r"^--set train=3: train: expected a mapping of keys, got 3$"):
        load_config(str(path), ["train=3"])


def test_nothing_to_learn_is_a_config_error():
    with pytest.raises(ConfigError, match="train.lr and train.head_lr are both 0"):
        load_config(None, ["train.lr=0", "train.head_lr=0"])
    load_config(None, ["train.lr=0"])  # a frozen encoder under a learning head is a real setting


def test_an_empty_type_in_the_config_is_an_error():
    with pytest.raises(ConfigError, match="every type needs a name"):
        load_config(None, ["data.labels=[PER, '']"])


@pytest.mark.parametrize("override, message", [("serve.port=70000", "serve.port must be >= 0 and <= 65535"),
                                               ("serve.batch_wait_ms=1e12", "serve.batch_wait_ms must be >= 0 and "
                                                                            "<= 1000")])
def test_service_settings_that_cannot_work(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


@pytest.mark.parametrize("override", ["train.lr=nan", "train.lr=inf", "model.min_score=nan", "train.head_lr=.inf"])
def test_non_finite_numbers_are_config_errors(override):
    with pytest.raises(ConfigError, match="expected a finite number"):
        load_config(None, [override])


def test_negative_batch_size_is_refused(trained, capsys):
    with pytest.raises(SystemExit) as stop:
        predict_main(["--model", str(trained / "run" / "best"), "--batch-size", "-1"])
    assert stop.value.code == 2 and "must be 1 or more, got -1" in capsys.readouterr().err


def test_config_not_in_utf8(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_bytes("output_dir: runs/ü\n".encode("latin-1"))
    assert train_main(["--config", str(path)]) == 2
    assert "config.yaml: not UTF-8 text" in capsys.readouterr().err


def test_a_key_written_twice_in_a_set_value_is_refused_as_in_a_file():
    with pytest.raises(ConfigError, match=r"--set data.train=.*'PER' is written twice; write it once"):
        load_config(overrides=["data.train=[{path: a.txt, types: [name, address], rename: {PER: name, PER: address}}]"])


def test_entries_mean_what_they_say():
    """types: [] would annotate no type at all; a file listed twice would be read and scored twice."""
    with pytest.raises(ConfigError, match=r"data.train\[0\].types: \[\] names no type; leave types out"):
        load_config(overrides=["data.train=[{path: a.txt, types: []}]"])
    with pytest.raises(ConfigError, match=r"data.dev\[1\]: .*a.txt is data.dev\[0\] again; list each file once"):
        load_config(overrides=["data.dev=[a.txt, {path: ./a.txt, types: [PER]}]"])


def test_a_removed_key_at_the_value_that_runs_now_loads_as_earlier_models_saved_it(tmp_path):
    path = write(tmp_path, "model:\n  lexicon: none\n  context: none\n  context_layers: 1\n  pair_rope: true\n"
                           "train:\n  ema_decay: 0.0\n  rdrop_alpha: 0\ninference:\n  pack_texts: true\n")
    config = load_config(path)
    assert not hasattr(config.model, "lexicon") and not hasattr(config.train, "ema_decay")
    assert not hasattr(config.inference, "pack_texts")
    long = write(tmp_path, "model:\n  lexicon: " + "w" * 5000 + "\n")
    with pytest.raises(ConfigError) as error:
        load_config(long)
    assert len(str(error.value)) < 500 and "model.lexicon was removed (in " in str(error.value)


def test_the_two_keys_of_a_large_training_file_read_as_the_one_that_replaced_them(tmp_path, caplog):
    saved = write(tmp_path, "train:\n  boundary_smoothing_max_texts: 3000\n  adversarial_min_texts: 3000\n")
    assert load_config(saved, saved=True).train.large_training_set == 3000 and not caplog.records  # a model's
    assert load_config(saved).train.large_training_set == 3000  # a user's file: said
    assert "train.boundary_smoothing_max_texts is now train.large_training_set" in caplog.text
    assert load_config(overrides=["train.adversarial_min_texts=700"]).train.large_training_set == 700
    with pytest.raises(ConfigError, match=r"train.boundary_smoothing_max_texts \(0\) and "
                                          r"train.adversarial_min_texts \(5000\) are now one key"):
        load_config(write(tmp_path, "train:\n  boundary_smoothing_max_texts: 0\n  adversarial_min_texts: 5000\n"))
    with pytest.raises(ConfigError, match="adversarial_min_texts 0 .FGM at any size. is now train.adversarial: fgm"):
        load_config(overrides=["train.adversarial_min_texts=0"])


def test_a_yaml_alias_bomb_is_refused_in_one_short_line(tmp_path):
    """A few hundred bytes of nested aliases expand to billions of values: refused before any is built."""
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    path = write(tmp_path, "\n".join(levels) + "\nmodel:\n  head: *i\n")
    assert len(open(path).read()) < 1000
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "aliases (*name) expand to more than 100,000 values" in str(error.value) and len(str(error.value)) < 300
