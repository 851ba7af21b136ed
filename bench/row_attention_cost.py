"""What reading rows as texts (masks.text_attention) costs a training step, against the encoder's plain 0/1 mask.

    python bench/row_attention_cost.py [--encoder m3e-small] [--shapes 16x52,16x128,8x512] [--repeats 5]

SpanNetwork.forward builds a [batch, 1, L, L] attention bias and position ids from the text numbers
on every step, training included (where a row always holds one text).  Here one training step
(forward, loss, backward, AdamW) of GlobalPointer over the encoder with 10 types is timed that way
and with the 0/1 mask handed to the encoder as PaddleNLP takes it, in turns, on random token ids.
"""
import argparse

from globalpointer import cpu_math
import paddle

from common import setup, span_model, synthetic_batch, interleaved_medians
from globalpointer.model.network import SpanNetwork


def plain_forward(model, input_ids, token_text, span_text):
    output = model.encoder(input_ids=input_ids, attention_mask=token_text)
    hidden = output[0] if isinstance(output, (tuple, list)) else output.last_hidden_state
    return model.head(model.dropout(hidden), span_text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encoder", default="m3e-small")
    parser.add_argument("--shapes", default="16x52,16x128,8x512", help="BATCHxLENGTH,...")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    setup("cpu", 0)
    print(f"host: {cpu_math.CHOSEN}")
    encoder, model = span_model(args.encoder, "global_pointer", 10)
    model.train()
    optimizer = paddle.optimizer.AdamW(1e-5, parameters=model.parameters())
    for shape in args.shapes.split(","):
        batch, length = (int(n) for n in shape.split("x"))
        inputs, gold = synthetic_batch(encoder, batch, length, 10)

        def step(forward):
            def run():
                loss, _ = model.head.loss(forward(model, **inputs), gold, inputs["span_text"])
                loss.backward()
                optimizer.step()
                optimizer.clear_grad()
            return run
        seconds = interleaved_medians({"rows": step(SpanNetwork.forward), "plain": step(plain_forward)}, args.repeats)
        print(f"{batch} x {length}: step {seconds['rows'] * 1000:.0f} ms reading rows as texts, "
              f"{seconds['plain'] * 1000:.0f} ms with the plain mask, ratio {seconds['rows'] / seconds['plain']:.3f}")


if __name__ == "__main__":
    main()
