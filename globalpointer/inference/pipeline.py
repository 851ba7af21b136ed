"""From a saved model to entities in two lines of Python; the CLIs are shells over this.

    import globalpointer
    ner = globalpointer.load("runs/quickstart/best")           # a checkpoint or an export
    ner("张三在北京大学读书")                                      # -> [{"start", "end", "type", "text", "score"}]
    # a relation model: {"entities": [...], "relations": [{"type", "head", "tail", "score"}]}, head and tail
    # the indices of the relation's two entities in "entities"
    for entities in ner.pipe(open("texts.txt", encoding="utf-8").read().splitlines(), batch_size=64): ...

``load`` reads the model directory's config, applies overrides (``model__min_score=0.8`` or
``overrides=["model.min_score=0.8"]``, as ``--set`` does), sets the device, picks the backend
(``inference.backend``) and only then builds the model.  Per-type thresholds that
``globalpointer calibrate`` stored in the directory are used unless
``model.use_calibration`` is false.
"""
import dataclasses
import difflib
import logging
from typing import Dict, Generator, Iterable, Iterator, List, Optional, Sequence, Union

from ..config import RunConfig, key_help, load_config, min_score_hint
from ..data.reading import lone_surrogate_at
from ..errors import ConfigError
from ..runtime import Runtime
from .doubt import certainty as record_certainty
from .extractor import run_steps

log = logging.getLogger("globalpointer")


class Pipeline:
    """Entities for texts of any length, with character offsets into each text (end exclusive).

    ``model``: what the model is (``model_directory.opening.ModelDirectory``: its record, types, tokenizer);
    ``config``: how this pipeline runs it (the record with the run's overrides: backend, device,
    batch sizes, decoding, service bounds)."""

    def __init__(self, extractor, model, config: RunConfig, runtime: Runtime, backend: str):
        self.extractor = extractor
        self.model = model
        self.config = config
        self.labels = model.trained_for.labels
        self.relations = list(model.trained_for.relations)  # a relation model's relation types; none: entities only
        self.runtime = runtime
        self.backend = backend
        self.directory = model.path

    def __repr__(self) -> str:
        return (f"Pipeline({self.directory!r}, backend={self.backend!r}, device={self.runtime.device!r}, "
                f"labels={self.labels!r})")

    def __call__(self, text: Union[str, Sequence[str]]) -> Union[List[dict], List[List[dict]]]:
        """The entity dicts of one text (a relation model: {"entities", "relations"}), or a list of them for a
        list of texts."""
        if isinstance(text, (list, tuple)):
            return list(self.pipe([_text(item, f"ner(): text {index}") for index, item in enumerate(text)]))
        return next(self.pipe([_text(text, "ner()")]))

    def pipe(self, texts: Iterable[str], batch_size: Optional[int] = None) -> Iterator[List[dict]]:
        """Entity dicts (a relation model: {"entities", "relations"}) per text, in order, ``batch_size`` texts
        predicted at a time (default 256)."""
        if isinstance(texts, (str, bytes)):  # iterating it would predict each character as a text
            raise TypeError(f"pipe() takes an iterable of texts, got one {type(texts).__name__}: call ner(text) "
                            f"for one text, or pipe([text])")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise ValueError(f"pipe(): batch_size must be a whole number of at least 1, got {batch_size!r}")
        batch: List[str] = []
        for index, text in enumerate(texts):
            batch.append(_text(text, f"pipe(): text {index}"))
            if len(batch) >= (batch_size or 256):
                yield from self._predict(batch)
                batch = []
        if batch:
            yield from self._predict(batch)

    def _predict(self, texts: Sequence[str]) -> Iterator[List[dict]]:
        yield from run_steps(self.predict_steps(texts))

    def evaluate(self, path: str):
        """Span precision / recall / F1 on the labelled file ``path``, the error kinds, and what was
        predicted (``evaluation.evaluate.evaluate_file``: what evaluate.py reports).  ``.headline["f1"]``
        is the score the model is chosen by: a relation model's strict triple F1 (its ``report["relations"]``;
        ``report["micro"]`` is its entities'), an entity model's span F1."""
        from ..evaluation.evaluate import evaluate_file

        return evaluate_file(self, path)

    def predict_steps(self, texts: Sequence[str], rows_per_pass: int = 0,
                      certainty: bool = False) -> Generator[int, None, List[List[dict]]]:
        """The entity dicts of ``texts``, one forward pass of ``rows_per_pass`` rows per step
        (``Extractor.record_steps``); with ``certainty``, {"entities", "certainty"} (and a relation
        model's "relations") per text, its certainty as ``inference.doubt.certainty`` gives it."""
        found = yield from self.extractor.record_steps(texts, rows_per_pass, margins=certainty)
        if not (certainty or self.relations):  # an entity model's: its entity dicts alone
            return [record.entity_dicts(with_score=True) for record in found]
        # {"entities", "relations"} per text (an event model's: "events")
        out = [record.dicts(with_score=True, relations=bool(self.relations), events=self.extractor.events)
               for record in found]
        if certainty:
            for item, record in zip(out, found):
                item["certainty"] = record_certainty(record)
        return out


def _text(text, where: str) -> str:
    if isinstance(text, str):
        at = lone_surrogate_at(text)
        if at is not None:  # as the service answers it (422): it is no character, and cannot be tokenized
            raise ValueError(f"{where} holds a lone surrogate at character {at} (a broken \\uXXXX escape), which "
                             f"is no character: repair the text")
        return text
    if isinstance(text, bytes):
        raise TypeError(f"{where} takes text (str), got bytes: decode them first, e.g. data.decode('utf-8')")
    raise TypeError(f"{where} takes text (str) or a list of texts, got {type(text).__name__}")


def _overrides(overrides: Optional[Sequence[str]], keyword: Dict[str, object]) -> List[str]:
    """``--set`` items from both forms: ``["model.min_score=0.8"]`` and ``model__min_score=0.8``; a
    keyword that names no config key, or a value the key cannot take, is an error that says so."""
    keys = [item.key for item in key_help()]
    for name, value in keyword.items():
        if name in ("threshold", "model__threshold"):
            raise ConfigError(f"load(): {name}={value!r}: {min_score_hint(value)} (model__min_score=...)")
        if name.replace("__", ".") not in keys:
            close = difflib.get_close_matches(name.replace("__", "."), keys, n=1)
            hint = f"; did you mean {close[0].replace('.', '__')}={value!r}?" if close else ""
            raise ConfigError(f"load(): {name}={value!r} is no config key; config keys are passed as SECTION__KEY "
                              f"(model__min_score=0.8 is --set model.min_score=0.8){hint}")
    keyword_items = [(key.replace('__', '.'), value) for key, value in keyword.items()]
    try:
        load_config(overrides=keyword_items, overrides_from=None)  # each value checked on its own, before the model's
    except ConfigError as error:
        raise ConfigError(f"load(): {error}") from None
    return list(overrides or []) + keyword_items


def _opened(model, overrides: Optional[Sequence[str]], backend: Optional[str], keyword: Dict[str, object]):
    """(ModelDirectory, run config) of a checkpoint or export (its path, or opened already), the
    overrides applied and checked."""
    from ..model_directory.opening import open_model

    settings = _overrides(overrides, keyword) + ([("inference.backend", backend)] if backend else [])
    opened = open_model(model)
    return opened, opened.run_config(settings)


def inference_config(model, overrides: Optional[Sequence[str]] = None, backend: Optional[str] = None,
                     **keyword_overrides) -> RunConfig:
    """The config ``load`` would build the model with, checked as ``load`` checks it (files, overrides,
    backend), without building the model: what a process that starts others needs to know.
    ``model``: a path, or a ``model_directory.opening.ModelDirectory`` (then no file is read)."""
    from ..model.backends import choose_backend

    opened, config = _opened(model, overrides, backend, keyword_overrides)
    choose_backend(config.inference.backend, opened, precision=config.inference.precision)
    return config


def _min_score_given(opened, config: RunConfig, overrides: List) -> bool:
    """Whether the caller set ``model.min_score`` (``--set``, ``load(..., model__min_score=...)``), which
    then wins over the fitted scores of thresholds.json, said in one line; set together with
    ``model.use_calibration=true`` the two are refused."""
    from ..model_directory.layout import THRESHOLDS
    from ..config import override_key

    given = {override_key(item) for item in overrides}
    if "model.min_score" not in given:
        return False
    if "model.use_calibration" in given and config.model.use_calibration:
        raise ConfigError("model.min_score and model.use_calibration=true are both set: the one minimum score for "
                          "every type, or the fitted ones of thresholds.json? set one of them")
    if opened.min_scores is not None:
        log.info("model.min_score=%g as set, for every type, in place of the fitted minimum scores of %s/%s",
                 config.model.min_score, opened.path, THRESHOLDS)
    return True


def _int8_or_float32(opened, config: RunConfig, backend: str) -> RunConfig:
    """``config``, or float32 in place of ``inference.precision=int8`` where the export's INT8 model for
    ``backend`` is not known to keep its F1 on this CPU (``backends.int8_unfit``), said in one line;
    ``inference.int8_unverified_cpu=int8`` runs it all the same."""
    from ..cpu_math import int8_kernels
    from ..model.backends import int8_unfit

    reason = int8_unfit(opened.export_info, backend, int8_kernels())
    if not reason:
        return config
    if config.inference.int8_unverified_cpu == "int8":
        log.warning("%s: %s; running INT8 all the same (inference.int8_unverified_cpu=int8)", opened.path, reason)
        return config
    log.warning("%s: %s; running float32 (model.onnx) instead: export with --verify DEV_FILE on this CPU, or set "
                "inference.int8_unverified_cpu=int8", opened.path, reason)
    return dataclasses.replace(config, inference=dataclasses.replace(config.inference, precision="float32"))


def load(model: str, overrides: Optional[Sequence[str]] = None, backend: Optional[str] = None,
         window_batch_size: int = 0, **keyword_overrides) -> Pipeline:
    """A Pipeline over a checkpoint directory (``RUN/best``) or an export (``globalpointer export``):
    its path, or the ``model_directory.opening.ModelDirectory`` a command opened.

    ``window_batch_size``: rows per forward pass (default ``inference.batch_size``; a row holds one
    window, or several short ones side by side)."""
    from ..model_directory.compiled import compiled_network
    from ..model_directory.layout import THRESHOLDS
    from ..corpus import featurizer_for
    from ..model.backends import BACKENDS, Settings, choose_backend
    from ..model.decode import score_logit
    from ..runtime import cpu_thread_count, setup_runtime
    from .extractor import Extractor

    opened, config = _opened(model, overrides, backend, keyword_overrides)
    directory, trained_for, tokenizer = opened.path, opened.trained_for, opened.tokenizer
    labels = trained_for.labels
    runtime = setup_runtime(config.device, config.cpu_threads)
    if config.inference.precision == "int8":
        config = _int8_or_float32(opened, config, choose_backend(config.inference.backend, opened, "int8",
                                                                 runtime.device))
    settings = Settings(config.model, opened, cpu_thread_count(config.cpu_threads, runtime.world_size),
                        runtime.device, config.inference.precision, config.inference.tensorrt,
                        opened.packs_texts)
    compiled = compiled_network(opened, config, settings)
    if compiled is not None:
        chosen, network = compiled
    else:
        chosen = choose_backend(config.inference.backend, opened, config.inference.precision, runtime.device)
        network = BACKENDS[chosen].build(directory, settings)
    threshold = score_logit(config.model.min_score)
    score_map = opened.score_map if config.model.use_calibration else None
    calibrated = opened.min_scores if config.model.use_calibration and not _min_score_given(
        opened, config, _overrides(overrides, keyword_overrides)) else None
    if score_map is not None:  # minimum scores on the calibrated score
        threshold = score_map.threshold_logits(calibrated or [config.model.min_score] * len(labels))
    elif calibrated is not None:
        threshold = [score_logit(score) for score in calibrated]
    if calibrated is not None:
        scores = f"{calibrated[0]:.3g} for every type" if len(set(calibrated)) == 1 else \
            "per type " + ", ".join(f"{label} {score:.3g}" for label, score in zip(labels, calibrated))
        if opened.pair_min_score is not None:
            scores += f", the pair cells {opened.pair_min_score:.3g}"
        log.info("%s/%s: minimum score %s, fitted on the dev file%s (model.use_calibration=false would give every "
                 "type model.min_score, %g)", directory, THRESHOLDS, scores,
                 "" if score_map is None else ", on scores calibrated there", config.model.min_score)
    decode = trained_for.decoding(config.model.decode)
    log.info("%s: %s backend (%s) on %s, %s entities%s", directory, chosen, config.inference.precision,
             runtime.device, decode,
             " (model.decode auto: no training text had overlapping ones)"
             if config.model.decode == "auto" and decode == "flat" else "")
    featurizer = featurizer_for(tokenizer, trained_for.tokenization, config.data.max_length,
                                config.data.window_overlap)
    pair = opened.pair_min_score if calibrated is not None else None
    extractor = Extractor.for_run(network, featurizer, trained_for, config, threshold, window_batch_size,
                                  None if pair is None else score_logit(pair))
    extractor.score_map = score_map
    return Pipeline(extractor, opened, config, runtime, chosen)
