"""The run configuration: typed sections with help text, YAML in and out, ``--set`` overrides.

Every key has a visible default (``--print-config`` shows them all with their help), an unknown
key is an error that names the closest valid one, and values are type-checked before any work.
``schema`` declares the keys, ``loading`` reads a config, ``writing`` writes one.
"""
from .loading import (PATH_KEYS, load_config, min_score_hint, override_key, override_text, require_files,
                      with_overrides)
from .schema import (RUN_TIME_KEYS, InferenceConfig, ModelConfig, RunConfig, ServeConfig, TrainConfig, backend_names,
                     key_help)
from .writing import dump_config, flatten_config, yaml_scalar

__all__ = ["PATH_KEYS", "load_config", "min_score_hint", "override_key", "override_text", "require_files",
           "with_overrides", "RUN_TIME_KEYS", "InferenceConfig", "ModelConfig", "RunConfig", "ServeConfig", "TrainConfig",
           "backend_names", "key_help", "dump_config", "flatten_config", "yaml_scalar"]
