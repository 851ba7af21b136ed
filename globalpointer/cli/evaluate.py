"""``globalpointer evaluate`` (evaluate.py): span precision / recall / F1 of a model on a labelled file."""
import argparse
import os

from ..errors import UserError
from ..files import check_output_files
from .arguments import inference_arguments, load_for_inference


def run(argv, prog):
    parser = argparse.ArgumentParser(prog=prog, description="Span precision / recall / F1 of a checkpoint.")
    inference_arguments(parser)
    parser.add_argument("--data", help="labelled file in any supported format (default: the run's test, else dev file)")
    parser.add_argument("--format", help="format of --data (default: the run's data.format)")
    parser.add_argument("--output", help="write the JSON report here, and the predictions beside it as .predictions.jsonl")
    parser.add_argument("--html", help="write a page drawing every text with its gold and predicted entities, each "
                                       "error marked (one self-contained file)")
    args = parser.parse_args(argv)
    from ..model_directory.opening import open_model
    from ..data.sources import source_paths
    from ..deploy.export import compile_if_it_pays
    from ..evaluation.evaluate import evaluate_file, predictions_path, write_evaluation
    from ..evaluation.relations import format_reports
    from ..evaluation.report_html import write_evaluation_page
    from ..inference.file_prediction import count_lines

    if args.format:
        args.set.append(("data.format", args.format))
    model = open_model(args.model)
    if args.data and os.path.isfile(args.data):
        compile_if_it_pays(model, args.set, args.backend, count_lines(args.data))
    ner = load_for_inference(args, model)
    config, labels = ner.config, ner.labels
    path = args.data or config.data.test or config.data.dev
    if not path:
        raise UserError("no data to evaluate: pass --data FILE")
    check_output_files({"--output": args.output, "--html": args.html,
                        "--output (its .predictions.jsonl)": args.output and predictions_path(args.output)},
                       [*source_paths(path), ner.directory])
    evaluation = evaluate_file(ner, path)
    records, predicted, report, _ = evaluation
    report["data"] = path if isinstance(path, str) else [source.name for source in path]
    report["model"] = args.model
    print(format_reports(report))
    if args.html:
        write_evaluation_page(args.html, records, predicted, labels, report)
    if args.output:
        write_evaluation(args.output, report, records, predicted, evaluation.found)
    return 0
