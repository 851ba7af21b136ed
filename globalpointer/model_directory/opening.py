"""Opening a model directory: its files checked (``layout``) and read once, into the ``ModelDirectory``
every command hands on; the record of what the model is, and the run config a reader builds on it."""
import dataclasses
import functools
import logging
import math
import os
from typing import List, NamedTuple, Optional, Tuple, Union

from ..config import RunConfig, flatten_config, load_config, override_key, override_text, with_overrides, yaml_scalar
from ..errors import CheckpointError, ConfigError
from ..files import read_json
from ..model.decode import sigmoid
from ..model.encoders import Encoder, bert_tokenizer, check_position_limit, saved_position_limit
from ..model.network import SpanNetwork, load_network
from ..model.score_map import score_map_from_json
from .compiled import model_digest
from .layout import (ARCHITECTURE, CHECKPOINT_INFO, CONFIG, LABELS, METADATA_FILES, RELATIONS, THRESHOLDS, TOKENIZER_CONFIG,
                     VOCAB, WEIGHTS, check_format_version, check_model_files, check_regular_file, is_export, locate_model,
                     read_export_info, recorded_packing)

log = logging.getLogger("globalpointer")


# model.decode auto decodes nested when at least this share of the training entities overlap another:
# flat decoding misses at most that share, and a stray nested annotation in a flat file (3 of CLUENER's
# 23,971 training entities; CMeEE's: 10.8%) must not buy the nested decoder's spurious overlaps
NESTED_MIN_SHARE = 0.01


class TrainedFor(NamedTuple):
    """What training resolved once, from the config and the data: the types in output order, the
    tokenization ``auto`` became, whether any training text had overlapping entities, whether every
    training entity began and ended at a space or a text's edge (``spans.on_word_boundaries``: a file
    read as words; such a model predicts whole words), and the share of training entities that
    overlap another (``spans.overlapping_share``).  None: not recorded, a checkpoint from before it
    was.  ``relations``: a relation model's relation types in output order (none: an entity model).
    Saved beside the config, which stays as the user wrote it."""
    labels: List[str]
    tokenization: str
    overlapping: Optional[bool] = None
    words: Optional[bool] = None
    overlapping_share: Optional[float] = None
    relations: Tuple[str, ...] = ()

    def decoding(self, decode: str) -> str:
        """``model.decode`` resolved: ``auto`` predicts flat entities for a model trained on flat
        ones (all but under NESTED_MIN_SHARE of them), so its output has no overlaps its training
        data did not teach; a checkpoint from before the share decodes as it did then."""
        if decode != "auto":
            return decode
        if self.overlapping_share is not None:
            return "nested" if self.overlapping_share >= NESTED_MIN_SHARE else "flat"
        return "flat" if self.overlapping is False else "nested"


# The keys of what a model is (its types, how it reads text, its network): a checkpoint's config records
# them as trained, and no reader may change them (the weights hold them)
MODEL_RECORD_KEYS = ("data.labels", "data.tokenization", "model.encoder", "model.head", "model.head_size",
                     "model.rope", "model.tril_mask")


def trained_config(config: RunConfig, trained_for: TrainedFor) -> RunConfig:
    """``config`` with what training resolved in place of what was asked for: the types in the model's
    output order and the tokenization ``auto`` became.  What a checkpoint's config.yaml records, and
    what every reader of the checkpoint reads."""
    return dataclasses.replace(config, data=dataclasses.replace(
        config.data, labels=list(trained_for.labels), tokenization=trained_for.tokenization))


def record_differences(record: RunConfig, config: RunConfig, keys=MODEL_RECORD_KEYS) -> List[str]:
    """The ``keys`` of what a model is on which ``config`` asks for another value than the model's
    ``record`` (``data.tokenization: auto`` and ``model.encoder: auto`` ask for none)."""
    recorded, asked = flatten_config(record), flatten_config(config)
    return [key for key in keys if asked[key] != recorded[key] and
            not (key in ("data.tokenization", "model.encoder") and asked[key] == "auto")]


class LoadedModel(NamedTuple):
    network: SpanNetwork
    encoder: Encoder
    config: RunConfig
    trained_for: TrainedFor
    directory: str


def _check_files(directory: str, names) -> None:
    missing = [name for name in names if not os.path.lexists(os.path.join(directory, name))]
    if missing:
        raise CheckpointError(f"{directory}: not a complete checkpoint, missing {', '.join(missing)}")
    for name in names:  # read before the record is checked
        check_regular_file(os.path.join(directory, name))


def _read_labels(directory: str, name: str = LABELS) -> List[str]:
    """labels.json (or a relation model's relations.json): type names, each once, in output order."""
    try:
        labels = read_json(os.path.join(directory, name))
        assert isinstance(labels, list) and labels and all(isinstance(x, str) and x.strip() for x in labels)
    except (ValueError, AssertionError):
        raise CheckpointError(f"{directory}/{name} is corrupted: expected a JSON list of type names") from None
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:  # the model's outputs are in label order: a repeated name would rename the types after it
        raise CheckpointError(f"{directory}/{name} names {', '.join(repeated)} more than once; restore the file "
                              f"from the run (every type once, in the order the model was trained with)")
    return labels


def read_min_scores(directory: str, labels: List[str]) -> Optional[List[float]]:
    """The calibrated minimum score (a probability, as ``model.min_score``) of every label, in label
    order, or None without the file.  Older files hold logits under ``thresholds``; they are read as
    the scores they mean."""
    path = os.path.join(directory, THRESHOLDS)
    if not os.path.isfile(path):
        return None
    fix = f"rerun globalpointer calibrate --model {directory} --data FILE, or delete the file"
    try:
        stored = read_json(path)
        key = "min_scores" if "min_scores" in stored or "thresholds" not in stored else "thresholds"
        scores = stored[key]
        values = [scores[label] for label in labels]
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path} is corrupted or not for this model's labels ({error!r}): {fix}") from None
    wrong = [f"{label}: {value!r}" for label, value in zip(labels, values)
             if isinstance(value, bool) or not isinstance(value, (int, float))]
    if wrong:
        raise CheckpointError(f"{path}: {key} must be JSON numbers, got {', '.join(wrong)}: {fix}")
    if key == "thresholds":  # logits
        values = [float(sigmoid(value)) if math.isfinite(value) else math.nan for value in values]
    if not all(0 < value < 1 for value in values) or set(scores) != set(labels):
        raise CheckpointError(f"{path} needs one minimum score between 0 and 1 (exclusive) for each of "
                              f"{', '.join(labels)}: {fix}")
    return [float(value) for value in values]


def read_config(path: str) -> RunConfig:
    """A config file as every reader reads it: the config.yaml of a model directory is the model's
    record (``read_record``: its types and tokenization as trained, its paths as saved); any
    other file is a user's config (its relative paths read from its folder)."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) == CONFIG and all(os.path.isfile(os.path.join(directory, name))
                                                       for name in METADATA_FILES):
        return read_record(directory)[0]
    return load_config(path)


def read_record(directory: str, overrides: List = None) -> Tuple[RunConfig, TrainedFor, dict]:
    """A checkpoint or export directory's config as the model's record (``open_model`` without the
    tokenizer), with ``overrides`` applied and checked (``ModelDirectory.run_config``); what it was
    trained for; its checkpoint.json."""
    _check_files(directory, METADATA_FILES)
    record, trained_for, info = _read_record(directory,
                                            read_export_info(directory) if is_export(directory) else None)
    config = _run_config(directory, record, overrides, saved_position_limit(_read_architecture(directory)))
    return config, trained_for, info


def _read_record(directory: str, export_info: Optional[dict] = None) -> Tuple[RunConfig, TrainedFor, dict]:
    """The model's record: config.yaml with the types and tokenization of labels.json and
    checkpoint.json, what the weights were trained as (a config.yaml of an earlier version may list
    the types in another order, or say auto); every file checked first (``check_model_files``;
    ``export_info``: an export's export.json, None for a checkpoint)."""
    info = _read_info(directory)
    check_model_files(directory, info, export_info)
    relations = tuple(_read_labels(directory, RELATIONS)) if os.path.isfile(os.path.join(directory, RELATIONS)) else ()
    trained_for = TrainedFor(_read_labels(directory), info["tokenization"], info.get("overlapping_entities"),
                             info.get("word_boundaries"), info.get("overlapping_entity_share"), relations)
    record = trained_config(load_config(os.path.join(directory, CONFIG), saved=True), trained_for)
    return record, trained_for, info


def _run_config(directory: str, record: RunConfig, overrides, position_limit: Optional[int]) -> RunConfig:
    """``record`` with ``overrides`` applied: how this run uses the model.  An override of what the
    model is (``MODEL_RECORD_KEYS``) to another value is an error, not ignored."""
    config = with_overrides(record, overrides, overrides_from="--set")
    changed = record_differences(record, config)
    if changed:
        given = next((override_text(item) for item in overrides if override_key(item) == changed[0]), changed[0])
        raise ConfigError(f"--set {given}: the model in {directory} was trained with {changed[0]}="
                          f"{yaml_scalar(flatten_config(record)[changed[0]])}; what a model is cannot change without "
                          f"training (leave {changed[0]} out, or train a new model)")
    config = trained_config(config, TrainedFor(record.data.labels, record.data.tokenization))  # auto is the record's
    check_position_limit(config, position_limit)
    return config


def _read_json_object(directory: str, name: str, expected: str, fits=lambda value: True) -> dict:
    """The JSON object in ``directory/name`` for which ``fits`` holds; a file that is not one (or
    cannot be parsed, or nests past the parser) is one CheckpointError saying what was ``expected``."""
    path = os.path.join(directory, name)
    try:
        value = read_json(path)
        assert isinstance(value, dict) and fits(value)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        raise CheckpointError(f"{path} is corrupted: expected {expected}; restore it from the run") from None
    return value


def _read_architecture(directory: str) -> dict:
    return _read_json_object(directory, ARCHITECTURE, "the encoder's architecture as a JSON object")


def _recorded_lower_case(directory: str) -> Optional[bool]:
    """Whether the tokenizer lower-cases, as the directory's tokenizer_config.json recorded it when the
    model was saved (None: not recorded, decided from the vocabulary)."""
    if not os.path.isfile(os.path.join(directory, TOKENIZER_CONFIG)):
        return None
    recorded = _read_json_object(directory, TOKENIZER_CONFIG, "the tokenizer's settings as a JSON object")
    lower_case = recorded.get("do_lower_case")
    return lower_case if isinstance(lower_case, bool) else None


def _read_info(directory: str) -> dict:
    def fits(info: dict) -> bool:
        share = info.get("overlapping_entity_share")
        return (isinstance(info["vocab_tokens"], int) and info["tokenization"] in ("char", "subword")
                and info.get("overlapping_entities") in (None, True, False)
                and info.get("word_boundaries") in (None, True, False)
                and (share is None or (type(share) in (int, float) and 0 <= share <= 1)))

    info = _read_json_object(directory, CHECKPOINT_INFO, '{"vocab_tokens": N, "tokenization": "char" or "subword"}',
                             fits)
    check_format_version(os.path.join(directory, CHECKPOINT_INFO), info)
    return info


@dataclasses.dataclass(frozen=True, eq=False)
class ModelDirectory:
    """A model directory opened once (``open_model``): its files read and checked, each once.  Every
    reader of a model (``globalpointer.load``, both services, export, compiling, ``choose_backend``)
    takes this value and opens none of them again.  ``record`` is what the model is, as trained;
    how one run uses it (device, backend, batch sizes, service bounds, decoding) is
    ``run_config(overrides)``."""
    path: str  # a checkpoint's (or the copy a kill between the two renames of a save left), or an export's
    kind: str  # "checkpoint" or "export"
    record: RunConfig
    trained_for: TrainedFor
    info: dict  # checkpoint.json
    architecture: dict  # config.json: the encoder's
    tokenizer: object
    export_info: dict  # an export's export.json as read (empty for a checkpoint)

    @property
    def export(self) -> bool:
        return self.kind == "export"

    def run_config(self, overrides: List = None) -> RunConfig:
        """The record with ``overrides`` applied and checked: what the model is cannot change, and what
        shaped the run that trained it (``TRAINING_RUN_KEYS``) shapes no reader of it unless set again."""
        config = _run_config(self.path, self.record, overrides, saved_position_limit(self.architecture))
        given = {override_key(item) for item in overrides or []}
        if "data.limit" not in given and config.data.limit:
            config = dataclasses.replace(config, data=dataclasses.replace(config.data, limit=0))
        return config

    @property
    def packs_texts(self) -> Optional[bool]:
        """What an export's export.json says of packing texts (``recorded_packing``; None for a checkpoint)."""
        return recorded_packing(self.export_info)

    @functools.cached_property
    def min_scores(self) -> Optional[List[float]]:
        """The calibrated minimum score of every type (``read_min_scores``: thresholds.json), read
        when first asked for: a run with ``model.use_calibration: false`` never opens the file."""
        return read_min_scores(self.path, self.trained_for.labels)

    @functools.cached_property
    def pair_min_score(self) -> Optional[float]:
        """A relation model's calibrated minimum score of its pair cells (thresholds.json's
        ``pair_min_score``, fitted with the entity types' by triple F1); None without one."""
        if not self.trained_for.relations or self.min_scores is None:
            return None
        path = os.path.join(self.path, THRESHOLDS)
        value = read_json(path).get("pair_min_score")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise CheckpointError(f"{path}: pair_min_score must be a number between 0 and 1 (exclusive), got "
                                  f"{value!r:.40}: rerun globalpointer calibrate --model {self.path} --data FILE, "
                                  f"or delete the file")
        return float(value)

    @functools.cached_property
    def score_map(self):
        """The map of calibrated scores fitted with the minimum scores (thresholds.json's ``score_map``,
        ``model.score_map``); None without one (a file of earlier versions: raw scores)."""
        if self.min_scores is None:
            return None
        path = os.path.join(self.path, THRESHOLDS)
        stored = read_json(path).get("score_map")
        if stored is None:
            return None
        try:
            return score_map_from_json(stored, bool(self.trained_for.relations))
        except ValueError as error:
            raise CheckpointError(f"{path}: {error}: rerun globalpointer calibrate --model {self.path} --data FILE, "
                                  f"or delete the file") from None

    @functools.cached_property
    def digest(self) -> str:
        """``model_digest``, computed when first asked for: when a compiled program is looked up or built."""
        return model_digest(self)


def open_model(model: Union[str, ModelDirectory]) -> ModelDirectory:
    """``model`` (a checkpoint or an export directory) resolved, its files checked and read: format
    version one this code reads, record, types, architecture, tokenizer.  A command opens it once
    and hands the value on; opened already, it is returned as it is."""
    if isinstance(model, ModelDirectory):
        return model
    path, kind = locate_model(model)
    export_info = read_export_info(path) if kind == "export" else {}
    _check_files(path, (WEIGHTS,) + METADATA_FILES if kind == "checkpoint" else METADATA_FILES)
    record, trained_for, info = _read_record(path, export_info if kind == "export" else None)
    architecture = _read_architecture(path)
    try:
        tokenizer = bert_tokenizer(os.path.join(path, VOCAB), _recorded_lower_case(path))
    except Exception as error:  # PaddleNLP raises many kinds for an unreadable vocabulary
        raise CheckpointError(f"{path}/vocab.txt cannot be read ({error})") from None
    if len(tokenizer.vocab) != info["vocab_tokens"]:  # a truncated file still predicts
        raise CheckpointError(f"{path}/vocab.txt has {len(tokenizer.vocab)} tokens but the model was trained with "
                              f"{info['vocab_tokens']}; the file is truncated or replaced: restore it from the run")
    return ModelDirectory(path, kind, record, trained_for, info, architecture, tokenizer, export_info)


def load_checkpoint(model: Union[str, ModelDirectory], overrides: List = None) -> LoadedModel:
    """The network of a checkpoint (its path, or its ``ModelDirectory``) on the current device, with
    the run config of ``overrides``."""
    model = open_model(model)
    if model.export:
        raise CheckpointError(f"{model.path} is an export, not a checkpoint: use the checkpoint it was made from "
                              f"(RUN_DIR/best)")
    config = model.run_config(overrides)
    network, encoder = load_network(model.path, config.model, len(model.trained_for.labels), model.tokenizer,
                                    model.architecture, len(model.trained_for.relations))
    return LoadedModel(network, encoder, config, model.trained_for, model.path)
