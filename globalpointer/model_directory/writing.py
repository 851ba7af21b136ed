"""Writing a checkpoint: into a partial directory beside it, swapped in whole, its record last."""
import json
import os

from ..config import RUN_TIME_KEYS, RunConfig, dump_config
from ..files import TEMPORARY_MARKER, directory_being_written, swap_in_directory
from ..model.encoders import Encoder, save_encoder_files
from ..model.network import SpanNetwork
from ..model.weights import save_state
from .layout import (CHECKED_DIGESTS, CHECKED_FILES, CHECKPOINT_INFO, CONFIG, FORMAT_VERSION, LABELS, METADATA_FILES,
                     RELATIONS, TOKENIZER_CONFIG, WEIGHTS, file_digests, file_record)
from .digests import remember_written
from .opening import TrainedFor


def write_checkpoint(directory: str, network: SpanNetwork, encoder: Encoder, config: RunConfig,
                     trained_for: TrainedFor, extra_state: dict = None, extra_json: dict = None) -> None:
    """Write into a new directory beside it and swap it in, so a kill leaves the old checkpoint whole."""
    with directory_being_written(directory) as partial:
        save_state(network.state_dict(), os.path.join(partial, WEIGHTS))
        with open(os.path.join(partial, CONFIG), "w", encoding="utf-8") as out:
            out.write(dump_config(config, leave_out=RUN_TIME_KEYS))
        with open(os.path.join(partial, LABELS), "w", encoding="utf-8") as out:
            json.dump(trained_for.labels, out, ensure_ascii=False, indent=1)
        if trained_for.relations:
            with open(os.path.join(partial, RELATIONS), "w", encoding="utf-8") as out:
                json.dump(list(trained_for.relations), out, ensure_ascii=False, indent=1)
        save_encoder_files(encoder, partial)
        for name in set(os.listdir(partial)) - {WEIGHTS, TOKENIZER_CONFIG, TEMPORARY_MARKER, RELATIONS, *METADATA_FILES}:
            os.remove(os.path.join(partial, name))  # the rest of what save_pretrained writes: read by no command
        for name, state in (extra_state or {}).items():
            save_state(state, os.path.join(partial, name))
        for name, obj in (extra_json or {}).items():
            with open(os.path.join(partial, name), "w", encoding="utf-8") as out:
                json.dump(obj, out, indent=1)
        record = file_record(partial)
        digests = file_digests(partial, record)
        with open(os.path.join(partial, CHECKPOINT_INFO), "w", encoding="utf-8") as out:  # last: it lists the rest
            json.dump({"format_version": FORMAT_VERSION, "vocab_tokens": len(encoder.tokenizer.vocab),
                       "tokenization": trained_for.tokenization,
                       "overlapping_entities": trained_for.overlapping, "word_boundaries": trained_for.words,
                       "overlapping_entity_share": trained_for.overlapping_share,
                       CHECKED_FILES: record, CHECKED_DIGESTS: digests}, out)
        swap_in_directory(partial, directory)
    remember_written(directory, digests)
