"""What the pair heads cost in prediction: a relation model against the entity model inside it (the same
encoder and entity head, its pair heads left out), on the same texts, timed in turns.

    python bench/relation_cost.py --model runs/relations-quickstart/best --data data/duie-sample/dev.json

Prints texts/s of both, their ratio (the issue's bound: within 1.5x), and that both find the same
entities (the entity planes are the same computation).
"""
import argparse
import logging

from common import interleaved_medians, setup, table
from globalpointer.corpus import featurizer_for, load_records
from globalpointer.inference.extractor import Extractor
from globalpointer.model.network import SpanNetwork
from globalpointer.model_directory.opening import load_checkpoint


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a relation model's checkpoint (RUN/best)")
    parser.add_argument("--data", required=True, help="the texts (any labelled format, or a JSON-lines file)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    setup("cpu", args.threads)
    loaded = load_checkpoint(args.model)
    if not loaded.trained_for.relations:
        parser.error(f"{args.model} is an entity model: pass a relation model")
    config, network = loaded.config, loaded.network
    entity_network = SpanNetwork(network.encoder, network.head.entity, 0.0)  # the same modules, no pair heads
    entity_network.eval()
    featurizer = featurizer_for(loaded.encoder.tokenizer, loaded.trained_for.tokenization, config.data.max_length,
                                config.data.window_overlap)
    relation = Extractor.for_run(network, featurizer, loaded.trained_for, config)
    entity = Extractor.for_run(entity_network, featurizer, loaded.trained_for._replace(relations=()), config)
    texts = [record.text for record in load_records(args.data)]
    same = [r.entities for r in relation.records(texts)] == entity.extract(texts)
    seconds = interleaved_medians({"relation model": lambda: relation.records(texts),
                                   "its entity model": lambda: entity.extract(texts)}, args.repeats, warmup=1)
    rows = [{"model": name, "texts": len(texts), "texts_per_s": round(len(texts) / value, 1),
             "time_vs_entity_model": f"{value / seconds['its entity model']:.2f}x"} for name, value in seconds.items()]
    print(table(rows))
    print(f"same entities: {same}")


if __name__ == "__main__":
    main()
