"""Encoder + head, and the self-contained checkpoint directory.

A checkpoint holds ``model.safetensors`` (encoder and head), ``config.yaml`` (the run config as the
user wrote it, with every default), what training resolved from it and the data (``labels.json``,
and ``checkpoint.json``: tokenization and vocabulary size), and the encoder's architecture and
tokenizer files, so that evaluation and prediction need nothing but the directory.  Checkpoints of earlier versions hold a pickled
``model_state.pdparams`` instead; it is read as data only (``weights.py``).
"""
import inspect
import json
import math
import os
import shutil
from typing import List, NamedTuple, Optional, Tuple

import paddle
from paddle import nn

from .config import ModelConfig, RunConfig, dump_config, load_config
from .model.encoders import (Encoder, bert_tokenizer, check_position_limit, encoder_architecture, save_encoder_files,
                       saved_position_limit)
from .errors import CheckpointError, ConfigError
from .files import FORMAT_VERSION, check_format_version, partial_directory, previous_versions, swap_in_directory
from .model.heads import build_head
from .model.linear_autograd import use_training_linear
from .model.masks import text_attention
from .model.weights import mismatches, read_state, save_state, summary

WEIGHTS = "model.safetensors"
LEGACY_WEIGHTS = "model_state.pdparams"
METADATA_FILES = ("config.yaml", "labels.json", "config.json", "vocab.txt")
CHECKPOINT_INFO = "checkpoint.json"  # resolved tokenization; vocabulary size, checked against vocab.txt
THRESHOLDS = "thresholds.json"  # per-type thresholds written by globalpointer calibrate


class SpanModel(nn.Layer):
    def __init__(self, encoder: nn.Layer, hidden_size: int, num_types: int, model: ModelConfig):
        super().__init__()
        self.encoder = use_training_linear(encoder)
        self.dropout = nn.Dropout(model.dropout)
        self.head = build_head(model.head, hidden_size, num_types, head_size=model.head_size, rope=model.rope,
                               tril_mask=model.tril_mask, loss=model.loss)
        self.takes_positions = "position_ids" in inspect.signature(encoder.forward).parameters

    @property
    def packs_texts(self) -> bool:
        """Whether a row may hold several texts: the encoder must take position ids (to start each
        text at 0) and the head must score spans (a tagger's CRF would run across the texts)."""
        return self.takes_positions and self.head.packs_texts

    def forward(self, input_ids, attention_mask, token_mask):
        """``attention_mask`` and ``token_mask`` number the texts of each row (masks.py): every text
        of a row is encoded and scored as if it were alone."""
        bias, position_ids = text_attention(attention_mask)
        positions = {"position_ids": position_ids} if self.takes_positions else {}
        output = self.encoder(input_ids=input_ids, attention_mask=bias, **positions)
        hidden = output[0] if isinstance(output, (tuple, list)) else output.last_hidden_state
        return self.head(self.dropout(hidden), token_mask)


def build_model(config: RunConfig, encoder: Encoder, num_types: int) -> SpanModel:
    return SpanModel(encoder.model, encoder.hidden_size, num_types, config.model)


class ModelRecord(NamedTuple):
    """What training resolved once, from the config and the data: the types in output order and the
    tokenization ``auto`` became.  Saved beside the config, which stays as the user wrote it."""
    labels: List[str]
    tokenization: str


def write_checkpoint(directory: str, model: SpanModel, encoder: Encoder, config: RunConfig, record: ModelRecord,
                     extra_state: dict = None, extra_json: dict = None) -> None:
    """Write into a new directory beside it and swap it in, so a kill leaves the old checkpoint whole."""
    partial = partial_directory(directory)
    try:
        save_state(model.state_dict(), os.path.join(partial, WEIGHTS))
        with open(os.path.join(partial, "config.yaml"), "w", encoding="utf-8") as out:
            out.write(dump_config(config))
        with open(os.path.join(partial, "labels.json"), "w", encoding="utf-8") as out:
            json.dump(record.labels, out, ensure_ascii=False, indent=1)
        save_encoder_files(encoder, partial)
        with open(os.path.join(partial, CHECKPOINT_INFO), "w", encoding="utf-8") as out:
            json.dump({"format_version": FORMAT_VERSION, "vocab_tokens": len(encoder.tokenizer.vocab),
                       "tokenization": record.tokenization}, out)
        for name, state in (extra_state or {}).items():
            save_state(state, os.path.join(partial, name))
        for name, obj in (extra_json or {}).items():
            with open(os.path.join(partial, name), "w", encoding="utf-8") as out:
                json.dump(obj, out, indent=1)
        swap_in_directory(partial, directory)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def resolve_checkpoint(directory: str) -> str:
    """The directory itself, or the copy left by a kill between the two renames of a save."""
    if os.path.isdir(directory):
        return directory
    for previous in previous_versions(directory):
        return previous
    raise CheckpointError(f"checkpoint directory not found: {directory} (expected RUN_DIR/best or RUN_DIR/last)")


class LoadedModel(NamedTuple):
    model: SpanModel
    encoder: Encoder
    config: RunConfig
    record: ModelRecord
    directory: str


def _check_files(directory: str, names) -> None:
    def present(name):
        legacy = name == WEIGHTS and os.path.isfile(os.path.join(directory, LEGACY_WEIGHTS))
        return legacy or os.path.isfile(os.path.join(directory, name))

    missing = [name for name in names if not present(name)]
    if missing:
        raise CheckpointError(f"{directory}: not a complete checkpoint, missing {', '.join(missing)}")


def _read_labels(directory: str) -> List[str]:
    try:
        with open(os.path.join(directory, "labels.json"), encoding="utf-8") as handle:
            labels = json.load(handle)
        assert isinstance(labels, list) and labels and all(isinstance(x, str) and x.strip() for x in labels)
    except (ValueError, AssertionError):
        raise CheckpointError(f"{directory}/labels.json is corrupted: expected a JSON list of type names") from None
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:  # the model's outputs are in label order: a repeated name would rename the types after it
        raise CheckpointError(f"{directory}/labels.json names {', '.join(repeated)} more than once; restore the file "
                              f"from the run (every type once, in the order the model was trained with)")
    return labels


def read_thresholds(directory: str, labels: List[str]) -> Optional[List[float]]:
    """The calibrated logit threshold of every label, in label order, or None without the file."""
    path = os.path.join(directory, THRESHOLDS)
    if not os.path.isfile(path):
        return None
    fix = f"rerun globalpointer calibrate --model {directory} --data FILE, or delete the file"
    try:
        with open(path, encoding="utf-8") as handle:
            thresholds = json.load(handle)["thresholds"]
        values = [thresholds[label] for label in labels]
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path} is corrupted or not for this model's labels ({error!r}): {fix}") from None
    wrong = [f"{label}: {value!r}" for label, value in zip(labels, values)
             if isinstance(value, bool) or not isinstance(value, (int, float))]
    if wrong:
        raise CheckpointError(f"{path}: thresholds must be JSON numbers, got {', '.join(wrong)}: {fix}")
    values = [float(value) for value in values]
    if not all(math.isfinite(value) for value in values) or set(thresholds) != set(labels):
        raise CheckpointError(f"{path} needs one finite threshold for each of {', '.join(labels)}: {fix}")
    return values


def weights_file(directory: str) -> str:
    """The checkpoint's weights: safetensors, or the pickled file of an earlier version."""
    for name in (WEIGHTS, LEGACY_WEIGHTS):
        if os.path.isfile(os.path.join(directory, name)):
            return os.path.join(directory, name)
    raise CheckpointError(f"{directory}: not a complete checkpoint, missing {WEIGHTS}")


def load_weights(model: nn.Layer, directory: str) -> None:
    """Set ``model``'s weights from a checkpoint directory; every parameter must be there with its shape."""
    path = weights_file(directory)
    state = read_state(path)
    problems = mismatches(model.state_dict(), state)
    if problems:
        raise CheckpointError(f"{path} does not match the model built from its config.yaml and labels.json "
                              f"(different head, encoder or number of types): {summary(problems)}")
    model.set_state_dict({name: paddle.to_tensor(value) for name, value in state.items()})


def load_metadata(directory: str, overrides: List[str] = None) -> Tuple[RunConfig, ModelRecord, object]:
    """Config, record and tokenizer of a checkpoint or export directory, without the weights.  An
    override of what training fixed (the types, the tokenization) is an error, not ignored."""
    _check_files(directory, METADATA_FILES)
    config = load_config(os.path.join(directory, "config.yaml"), overrides)
    try:
        tokenizer = bert_tokenizer(os.path.join(directory, "vocab.txt"))
    except Exception as error:  # PaddleNLP raises many kinds for an unreadable vocabulary
        raise CheckpointError(f"{directory}/vocab.txt cannot be read ({error})") from None
    info = _read_info(directory)
    if "vocab_tokens" in info and len(tokenizer.vocab) != info["vocab_tokens"]:  # a truncated file still predicts
        raise CheckpointError(f"{directory}/vocab.txt has {len(tokenizer.vocab)} tokens but the model was trained with "
                              f"{info['vocab_tokens']}; the file is truncated or replaced: restore it from the run")
    labels = _read_labels(directory)
    check_position_limit(config, saved_position_limit(directory))
    # checkpoints of earlier versions saved the resolved tokenization in their config
    tokenization = info.get("tokenization") or load_config(os.path.join(directory, "config.yaml")).data.tokenization
    if config.data.labels and list(config.data.labels) != labels:
        raise ConfigError(f"data.labels: the model in {directory} was trained for {', '.join(labels)}; its types "
                          f"cannot change without training (leave data.labels out, or train a new model)")
    if config.data.tokenization not in ("auto", tokenization):
        raise ConfigError(f"data.tokenization: the model in {directory} was trained with {tokenization} tokens; "
                          f"it cannot read {config.data.tokenization} tokens (leave data.tokenization out)")
    return config, ModelRecord(labels, tokenization), tokenizer


def _read_info(directory: str) -> dict:
    path = os.path.join(directory, CHECKPOINT_INFO)
    if not os.path.isfile(path):  # checkpoints of earlier versions
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            info = json.load(handle)
        assert isinstance(info, dict) and isinstance(info["vocab_tokens"], int)
        assert info.get("tokenization", "char") in ("char", "subword")
    except (ValueError, KeyError, TypeError, AssertionError):
        raise CheckpointError(f"{path} is corrupted: expected {{\"vocab_tokens\": N, \"tokenization\": "
                              f"\"char\" or \"subword\"}}") from None
    check_format_version(path, info)
    return info


def check_checkpoint_files(directory: str) -> None:
    _check_files(directory, (WEIGHTS,) + METADATA_FILES)


def load_checkpoint(directory: str, overrides: List[str] = None) -> LoadedModel:
    directory = resolve_checkpoint(directory)
    check_checkpoint_files(directory)
    config, record, tokenizer = load_metadata(directory, overrides)
    return build_from_checkpoint(directory, config, record, tokenizer)


def build_from_checkpoint(directory: str, config: RunConfig, record: ModelRecord, tokenizer) -> LoadedModel:
    """The model of a checkpoint whose metadata ``load_metadata`` has read (on the current device)."""
    _check_files(directory, (WEIGHTS,))
    try:
        encoder_model = encoder_architecture(directory)
    except Exception as error:  # PaddleNLP raises many kinds for an unreadable config.json
        raise CheckpointError(f"{directory}: cannot rebuild the encoder from config.json ({error})") from None
    encoder = Encoder(encoder_model, tokenizer, encoder_model.config.hidden_size)
    model = build_model(config, encoder, len(record.labels))
    load_weights(model, directory)
    model.eval()
    return LoadedModel(model, encoder, config, record, directory)
