"""checkpoint.py: what a checkpoint's config.yaml records (what the model is, not how it is run)."""
import shutil

import yaml

from globalpointer.checkpoint import load_metadata
from globalpointer.config import RUN_TIME_SECTIONS, InferenceConfig, ServeConfig


def test_a_checkpoint_records_what_the_model_is_not_how_it_is_served(trained, tmp_path):
    checkpoint = trained / "run" / "best"
    saved = yaml.safe_load((checkpoint / "config.yaml").read_text(encoding="utf-8"))
    assert {"data", "model", "train"} <= set(saved) and not set(RUN_TIME_SECTIONS) & set(saved)
    config, _, _ = load_metadata(str(checkpoint), ["serve.port=8123", "inference.batch_size=5"])
    assert (config.serve.port, config.inference.batch_size) == (8123, 5)


def test_an_older_checkpoints_run_time_sections_are_left_to_the_defaults(trained, tmp_path):
    """Versions before this one froze inference and serve into every checkpoint; they load, and how
    they run comes from the defaults and --set, as for a new checkpoint."""
    old = tmp_path / "old"
    shutil.copytree(trained / "run" / "best", old)
    with open(old / "config.yaml", "a", encoding="utf-8") as out:
        out.write("inference:\n  batch_size: 3\n  backend: onnxruntime\nserve:\n  port: 1234\n")
    config, _, _ = load_metadata(str(old))
    assert config.serve == ServeConfig() and config.inference == InferenceConfig()
    assert load_metadata(str(old), ["serve.port=1234"])[0].serve.port == 1234
