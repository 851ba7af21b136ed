"""data/lexicon.py: lexicon codes (model.lexicon) against a plain formula, and a model that reads
them: trained, saved with its words, loaded, exported and started from."""
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import globalpointer
from globalpointer.checkpoint import open_model
from globalpointer.cli import train_main
from globalpointer.config import load_config
from globalpointer.data.lexicon import (LENGTHS, LEXICON_CODES, LEXICON_FILE, MAX_WORD, Lexicon, jieba_dictionary,
                                        role_code, training_lexicon)
from globalpointer.deploy.export import compile_if_it_pays, export_checkpoint
from globalpointer.errors import CheckpointError, ConfigError
from synthetic import tiny_config

WORDS = ["北京", "北京大学", "大学", "上海", "张三", "复旦大学", "学的"]


def roles_by_occurrence(words, text):
    """Per character: (longest word beginning there, longest ending there, inside one), found by
    looking up every occurrence of every word."""
    begins, ends, inside = [0] * len(text), [0] * len(text), [False] * len(text)
    for word in words:
        if not 2 <= len(word) <= MAX_WORD or any(c.isspace() for c in word):
            continue
        at = text.find(word)
        while at >= 0:
            last = at + len(word) - 1
            begins[at], ends[last] = max(begins[at], len(word)), max(ends[last], len(word))
            for position in range(at + 1, last):
                inside[position] = True
            at = text.find(word, at + 1)
    return begins, ends, inside


def decoded(code):
    """(begins, ends, inside) as the code's length values (0: none, 1: 2 characters, ... 3: 4 or more)."""
    inside, rest = code % 2, code // 2
    return rest // LENGTHS, rest % LENGTHS, bool(inside)


def length_value(length):
    return 0 if length == 0 else {2: 1, 3: 2}.get(length, 3)


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.text("北京大学上海张三的 ", min_size=1, max_size=10), max_size=8),
       text=st.text("北京大学上海张三的 x", max_size=30))
def test_each_characters_code_says_the_words_it_begins_ends_and_is_inside(words, text):
    lexicon = Lexicon(words)
    codes = lexicon.token_codes(text, [(i, i + 1) for i in range(len(text))])
    begins, ends, inside = roles_by_occurrence(words, text)
    assert [decoded(code) for code in codes] == [
        (length_value(b), length_value(e), i) for b, e, i in zip(begins, ends, inside)]
    assert all(0 <= code < LEXICON_CODES for code in codes)


def test_a_token_of_several_characters_takes_its_first_ones_beginnings_and_its_last_ones_endings():
    lexicon = Lexicon(["ab", "bcd", "de"])  # "abcde": ab, bcd, de
    codes = lexicon.token_codes("abcde", [(0, 2), (2, 5)])
    assert codes == [role_code(2, 2, False), role_code(0, 2, True)]


def test_codes_are_distinct_for_distinct_roles():
    seen = {role_code(b, e, i) for b in (0, 2, 3, 4) for e in (0, 2, 3, 4) for i in (False, True)}
    assert seen == set(range(LEXICON_CODES))
    assert role_code(9, 0, False) == role_code(4, 0, False)  # 4 or more


def test_jiebas_dictionary_is_the_default_word_list():
    lexicon = training_lexicon("jieba")
    assert len(lexicon.words) > 300_000 and "北京大学" in lexicon.words
    assert os.path.basename(jieba_dictionary()) == "dict.txt"


def test_a_word_list_that_is_missing_or_empty_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="model.lexicon=.*nowhere.txt: no such file"):
        training_lexicon(str(tmp_path / "nowhere.txt"))
    (tmp_path / "one.txt").write_text("北\n京\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no words of 2 to 8 characters"):
        training_lexicon(str(tmp_path / "one.txt"))


def test_a_word_lists_relative_path_is_read_from_the_configs_folder(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "run.yaml").write_text("model:\n  lexicon: words.txt\n", encoding="utf-8")
    assert load_config(str(tmp_path / "conf" / "run.yaml")).model.lexicon == str(tmp_path / "conf" / "words.txt")
    monkeypatch.chdir(tmp_path)
    assert load_config(None, ["model.lexicon=mine.txt"]).model.lexicon == str(tmp_path / "mine.txt")
    assert load_config(None, ["model.lexicon=jieba"]).model.lexicon == "jieba"


@pytest.fixture(scope="module")
def lexicon_run(tmp_path_factory):
    """A tiny model trained with a word list, and its export (float32 and INT8)."""
    folder = tmp_path_factory.mktemp("lexicon")
    (folder / "words.txt").write_text("".join(f"{word} 3 n\n" for word in WORDS), encoding="utf-8")
    assert train_main(["--config", tiny_config(folder, model__lexicon="words.txt", train__epochs=2)]) == 0
    export_checkpoint(str(folder / "run" / "best"), str(folder / "export"), quantize="int8")
    return folder


def dev_texts(folder, count=20):
    lines = (folder / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:count]
    return [json.loads(line)["text"] for line in lines]


def spans(found):
    return [[(e["start"], e["end"], e["type"]) for e in entities] for entities in found]


def test_a_model_keeps_its_words_and_every_backend_reads_them(lexicon_run):
    best = lexicon_run / "run" / "best"
    assert sorted((best / LEXICON_FILE).read_text(encoding="utf-8").split()) == sorted(WORDS)
    os.remove(lexicon_run / "words.txt")  # the model reads its own copy, not the file it was trained from
    opened = open_model(str(best))
    assert opened.lexicon.words == frozenset(WORDS)
    texts = dev_texts(lexicon_run)
    expected = spans(globalpointer.load(str(best), backend="dynamic").pipe(texts))
    assert any(expected)
    for backend, precision in (("paddle-inference", "float32"), ("onnxruntime", "float32"), ("onnxruntime", "int8")):
        exported = globalpointer.load(str(lexicon_run / "export"), [("inference.precision", precision)],
                                      backend=backend)
        assert spans(exported.pipe(texts)) == expected, (backend, precision)


def test_the_program_compiled_from_a_lexicon_model_reads_its_codes(lexicon_run, tmp_path, monkeypatch):
    best = str(lexicon_run / "run" / "best")
    texts = dev_texts(lexicon_run)
    expected = spans(globalpointer.load(best, backend="dynamic").pipe(texts))
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    compile_if_it_pays(best, [], None, lines=10 ** 6)
    compiled = globalpointer.load(best)
    assert compiled.backend == "paddle-inference"
    assert spans(compiled.pipe(texts)) == expected


def test_the_codes_change_what_the_model_scores(lexicon_run):
    """Trained away from zero, the code vectors move the logits: the same text with no words known
    scores differently."""
    from globalpointer.data.batching import collate_rows

    loaded = globalpointer.load(str(lexicon_run / "run" / "best"), backend="dynamic")
    assert float(np.abs(loaded.extractor.model.lexicon.weight.numpy()).max()) > 0
    featurizer = loaded.extractor.featurizer
    window = featurizer.text_windows(["北京大学的张三在上海"])
    batch = collate_rows([window], featurizer.pad_id)
    blank = dict(batch, lexicon=np.zeros_like(batch["lexicon"]))
    import paddle

    from globalpointer.model.network import model_inputs
    with paddle.no_grad():
        with_words = loaded.extractor.model(**model_inputs(batch)).numpy()
        without = loaded.extractor.model(**model_inputs(blank)).numpy()
    assert np.abs(with_words - without).max() > 1e-3


def test_a_model_without_its_word_list_is_refused_by_name(lexicon_run, tmp_path):
    import shutil

    copy = tmp_path / "best"
    shutil.copytree(lexicon_run / "run" / "best", copy)
    os.remove(copy / LEXICON_FILE)
    with pytest.raises(CheckpointError, match=f"{LEXICON_FILE} is missing; restore it from the run"):
        open_model(str(copy))


def test_a_run_from_a_model_with_words_reads_that_models_words(lexicon_run, tmp_path):
    """--init-from: the words come from the model it starts from (its word list may be gone), and
    the new model keeps them."""
    config = tiny_config(tmp_path, model__lexicon=str(lexicon_run / "words.txt"), train__epochs=1,
                         train__init_from=str(lexicon_run / "run" / "best"))
    assert train_main(["--config", config]) == 0
    best = tmp_path / "run" / "best"
    assert open_model(str(best)).lexicon.words == frozenset(WORDS)
    assert any(spans(globalpointer.load(str(best)).pipe(dev_texts(lexicon_run))))


def test_a_resumed_run_reads_the_words_it_began_with(tmp_path):
    (tmp_path / "words.txt").write_text("北京\n张三\n", encoding="utf-8")
    config = tiny_config(tmp_path, model__lexicon="words.txt", train__epochs=1)
    assert train_main(["--config", config]) == 0
    os.remove(tmp_path / "words.txt")  # the run's last checkpoint keeps them
    assert train_main(["--config", config, "--resume"]) == 0
    assert open_model(str(tmp_path / "run" / "best")).lexicon.words == frozenset(["北京", "张三"])
