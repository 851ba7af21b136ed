"""``globalpointer serve``: the HTTP service."""
import argparse

from ..config import ServeConfig
from .arguments import inference_arguments


def run(argv, prog) -> int:
    from ..deploy.serve import run_service

    parser = argparse.ArgumentParser(prog=prog, description="The HTTP service: POST /v1/extract, GET /v1/labels, "
                                                             "GET /health, GET /docs.")
    inference_arguments(parser, service=True)
    parser.add_argument("--host", help=f"same as --set serve.host=... (default {ServeConfig.host})")
    parser.add_argument("--port", type=int, help=f"same as --set serve.port=... (default {ServeConfig.port})")
    parser.add_argument("--workers", type=int, help="same as --set serve.workers=... (default 0: one per CPU core; "
                                                    "1 on a GPU)")
    args = parser.parse_args(argv)
    settings = (("host", args.host), ("port", args.port), ("workers", args.workers),
                ("rows_per_pass", args.rows_per_pass))
    run_service(args.model, args.set + [(f"serve.{key}", value) for key, value in settings if value is not None],
                args.backend)
    return 0
