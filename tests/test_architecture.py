"""Rules of the package's shape that a change could break without a failing behaviour test."""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "globalpointer"
LONGEST_FUNCTION = 70  # lines: a function longer than a screen is two steps, each of which wants a name


def test_no_function_is_longer_than_a_screen():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST_FUNCTION:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these: " + ", ".join(long)


LONGEST_MODULE = 500  # lines: a module longer than this holds two things, each of which wants a file


def test_no_module_is_longer_than_its_ceiling():
    long = [f"{path.relative_to(PACKAGE.parent)} ({count} lines)" for path in sorted(PACKAGE.rglob("*.py"))
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > LONGEST_MODULE]
    assert not long, "split these: " + ", ".join(long)


# The encoder's own directories (Hugging Face's, PaddleNLP's) name their files as their authors do
OTHER_FORMATS = {"model/encoders.py"}


def test_the_model_directorys_file_names_are_spelled_in_its_package_alone():
    """Every file name of a model directory is a constant of model_directory/layout.py; code elsewhere
    names the constant, so that a new file (relations, say) has one place to be added."""
    from globalpointer.model_directory import layout

    names = {value for key, value in vars(layout).items() if key.isupper() and isinstance(value, str)
             and "." in value and not value.startswith(".")}
    assert {"model.safetensors", "config.yaml", "labels.json", "checkpoint.json", "export.json",
            "inference.json", "model.int8.onnx", "trainer_state.json"} <= names
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        if where.startswith("model_directory/") or where in OTHER_FORMATS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                spelled.append(f"{where}:{node.lineno} {node.value!r}")
    assert not spelled, "name these through model_directory.layout: " + ", ".join(spelled)


# Adding or removing a config key or a registry's entry is a change a reviewer sees in this file
CONFIG_KEYS = [
    "cpu_threads", "data.dev", "data.format", "data.labels", "data.limit", "data.max_length", "data.on_error",
    "data.test", "data.tokenization", "data.train", "data.window_overlap", "device", "inference.backend",
    "inference.batch_size", "inference.compile_from_lines", "inference.compiled_cache_mb",
    "inference.int8_unverified_cpu", "inference.max_entities_per_type", "inference.max_events_per_type",
    "inference.max_pairs_per_relation",
    "inference.precision", "inference.tensorrt",
    "model.decode", "model.dropout", "model.encoder", "model.head", "model.head_size", "model.loss",
    "model.min_score", "model.rope", "model.tril_mask", "model.use_calibration", "output_dir",
    "serve.batch_texts", "serve.batch_wait_ms", "serve.client_timeout_s", "serve.host", "serve.max_body_bytes", "serve.max_header_bytes",
    "serve.max_request_tokens", "serve.max_text_chars", "serve.max_texts", "serve.port", "serve.rows_per_pass",
    "serve.shutdown_timeout_s", "serve.workers", "train.adversarial", "train.adversarial_epsilon", "train.amp",
    "train.batch_size", "train.boundary_smoothing", "train.boundary_smoothing_size", "train.calibrate",
    "train.epochs", "train.eval_every", "train.grad_accum_steps", "train.head_lr", "train.init_from",
    "train.large_training_set", "train.layer_lr_decay", "train.log_every", "train.lr", "train.max_grad_norm",
    "train.max_steps", "train.min_steps", "train.patience", "train.seed", "train.small_training_set", "train.warmup_ratio",
    "train.weight_decay"]
REGISTRIES = {
    "heads": ["global_pointer", "efficient_global_pointer"],
    "backends": ["openvino", "onnxruntime", "paddle-inference", "dynamic"],
    "formats": ["auto", "duee", "phee", "events", "duie", "tokens", "triples", "label-studio", "cluener", "doccano", "cmeee", "jsonl", "chars",
                "chars-position", "conll"],
    "output formats": ["jsonl", "label-studio", "doccano"],
}


def test_the_config_keys_and_the_registries_are_as_reviewed():
    from globalpointer.config import flatten_config, load_config
    from globalpointer.data.readers import FORMATS
    from globalpointer.inference.file_prediction import OUTPUT_FORMATS
    from globalpointer.model.backends import BACKENDS
    from globalpointer.model.heads import HEADS

    assert sorted(flatten_config(load_config())) == CONFIG_KEYS
    assert {"heads": list(HEADS), "backends": list(BACKENDS), "formats": list(FORMATS),
            "output formats": list(OUTPUT_FORMATS)} == REGISTRIES


def test_every_hypothesis_float_strategy_leaves_out_subnormals():
    """A library the suite loads earlier sets the CPU's flush-to-zero flag, and from then on Hypothesis refuses
    to build a float strategy that may draw subnormals (FloatingPointError): such a test passes alone and fails
    in the full run, as CI found."""
    tests = pathlib.Path(__file__).resolve().parent
    missing = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "floats"
                    and not any(keyword.arg == "allow_subnormal" for keyword in node.keywords)):
                missing.append(f"{path.name}:{node.lineno}")
    assert not missing, "pass allow_subnormal=False at: " + ", ".join(missing)
