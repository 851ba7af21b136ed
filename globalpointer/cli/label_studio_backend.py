"""``globalpointer label-studio-backend``: the model as a Label Studio ML backend."""
import argparse
import os

from ..config import ServeConfig, override_key
from ..model_directory.layout import CONFIG
from .arguments import inference_arguments


LABEL_STUDIO_PORT = 9090


def run(argv, prog) -> int:
    from ..deploy.label_studio_backend import run_backend
    from ..files import check_not_input

    parser = argparse.ArgumentParser(prog=prog, description="The model as a Label Studio ML backend: "
                                                             "pre-annotations for every task opened, retraining on "
                                                             "the project's annotations (docs/annotation.md).")
    inference_arguments(parser, service=True)
    parser.add_argument("--host", help=f"same as --set serve.host=... (default {ServeConfig.host}; another address needs "
                                       "basic authentication or --allow-unauthenticated)")
    parser.add_argument("--port", type=int, help=f"same as --set serve.port=... (default {LABEL_STUDIO_PORT}, the "
                                                 f"port of Label Studio's examples)")
    parser.add_argument("--allow-unauthenticated", action="store_true",
                        help="listen beyond loopback without BASIC_AUTH_USER / BASIC_AUTH_PASS: whoever reaches the "
                             "port gets predictions and can start training rounds")
    parser.add_argument("--work-dir", default="runs/label-studio",
                        help="where each training round writes its data, config, log and model (round-001, ...)")
    parser.add_argument("--base-config", help="the config a round trains with, its training and dev texts added to "
                                              "the project's annotations (default: the model's own config.yaml)")
    parser.add_argument("--label-studio-url", default=os.environ.get("LABEL_STUDIO_URL", ""),
                        help="Label Studio's address (http or https) for fetching annotations (default: "
                             "$LABEL_STUDIO_URL); its token is $LABEL_STUDIO_API_KEY.  Without them, only a backend "
                             "with basic authentication takes both from Label Studio's /setup")
    args = parser.parse_args(argv)
    check_not_input(args.work_dir, "--work-dir", [args.model])
    if args.port is None and not any(override_key(item) == "serve.port" for item in args.set):
        args.port = LABEL_STUDIO_PORT
    settings = (("serve.host", args.host), ("serve.port", args.port), ("inference.backend", args.backend),
                ("serve.rows_per_pass", args.rows_per_pass))
    run_backend(args.model, args.set + [(key, value) for key, value in settings if value is not None],
                args.work_dir, args.base_config or os.path.join(args.model, CONFIG), args.label_studio_url,
                os.environ.get("LABEL_STUDIO_API_KEY", ""), args.allow_unauthenticated)
    return 0
