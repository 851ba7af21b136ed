"""Time and peak memory of one training step as the length and the number of types grow.

    python bench/scaling.py [--encoder m3e-small] [--lengths 64,128,256,512,1024,2048] [--types 10,50,100]

Each configuration runs in a fresh process so that its peak resident memory (ru_maxrss) is its own;
the encoder alone (forward + backward) is the baseline of each length.  Lengths past the encoder's
512 positions are measured on the head and loss alone (hidden states as input): in use, texts that
long are cut into windows before the encoder.
"""
import argparse
import json
import resource
import subprocess
import sys

from common import Rows, median_seconds, setup, span_model, synthetic_batch


def measure(encoder_name, head, num_types, length, loss, batch_size, repeats) -> dict:
    import paddle

    setup("auto")
    encoder, model = span_model(encoder_name, "global_pointer" if head == "encoder" else head, num_types,
                                "sparse" if loss == "-" else loss)
    model.train()
    positions = encoder.model.config.max_position_embeddings
    with_encoder = length <= positions
    inputs, gold = synthetic_batch(encoder, batch_size, min(length, positions), num_types)
    if not with_encoder:
        _, gold = synthetic_batch(encoder, batch_size, length, num_types)
        hidden = paddle.randn([batch_size, length, encoder.hidden_size])
        hidden.stop_gradient = False
        span_text = paddle.ones([batch_size, length], dtype="bool")

    def step():
        if head == "encoder":
            model.encoder(input_ids=inputs["input_ids"], attention_mask=inputs["token_text"])[0].mean().backward()
        elif with_encoder:
            logits = model(**inputs)
            model.head.loss(logits, gold, inputs["span_text"])[0].backward()
        else:
            logits = model.head(hidden, span_text)
            model.head.loss(logits, gold, span_text)[0].backward()
        model.clear_gradients()

    seconds = median_seconds(step, repeats, warmup=1)
    return {"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "with_encoder": with_encoder}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encoder", default="m3e-small")
    parser.add_argument("--lengths", default="64,128,256,512,1024,2048")
    parser.add_argument("--types", default="10,50,100")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one configuration as JSON
    args = parser.parse_args()
    if args.one:
        spec = json.loads(args.one)
        print(json.dumps(measure(args.encoder, batch_size=args.batch_size, repeats=args.repeats, **spec)))
        return

    def run(spec):
        out = subprocess.run([sys.executable, __file__, "--encoder", args.encoder, "--batch-size", str(args.batch_size),
                              "--repeats", str(args.repeats), "--one", json.dumps(spec)],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    rows = Rows()
    configurations = [("global_pointer", "sparse"), ("global_pointer", "dense"),
                      ("efficient_global_pointer", "sparse"), ("efficient_global_pointer", "dense")]
    for length in map(int, args.lengths.split(",")):
        base = run({"head": "encoder", "num_types": 10, "length": length, "loss": "-"}) if length <= 512 else None
        for num_types in map(int, args.types.split(",")):
            for head, loss in configurations:
                result = run({"head": head, "num_types": num_types, "length": length, "loss": loss})
                row = {"length": length, "types": num_types, "head": head, "loss": loss,
                       "step_s": f"{result['seconds']:.3f}", "peak_mb": f"{result['peak_rss_mb']:.0f}",
                       "encoder": "yes" if result["with_encoder"] else "no (head+loss only)"}
                if base:
                    row["time_vs_encoder"] = f"{result['seconds'] / base['seconds']:.2f}"
                    row["memory_vs_encoder"] = f"{result['peak_rss_mb'] / base['peak_rss_mb']:.2f}"
                else:
                    row["time_vs_encoder"] = row["memory_vs_encoder"] = "-"
                rows.add(row)
    rows.finish()


if __name__ == "__main__":
    main()
