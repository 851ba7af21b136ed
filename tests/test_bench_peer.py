"""bench/peer.py's PaddleNLPRelationPipeline, PaddleNLP's GPLinker as its Taskflow predicts with it
(tokenizer with offsets, padded batches, the layer's forward, ``gp_decode``): on the same trained network
it gives the triples this project's Extractor gives, so the prediction speed the comparison reports for
it is of the same answers."""
import yaml

from peer import build_peer_relations
from synthetic import relation_lines, write_lines
from vs_paddlenlp_relations import extractor_of, own_pipeline, pipeline_agreement


def test_the_peers_own_pipeline_gives_our_extractors_triples(tmp_path):
    from globalpointer.config import load_config
    from globalpointer.training.loop import train

    config = {"data": {"train": write_lines(tmp_path / "train.json", relation_lines(200, 1)),
                       "dev": write_lines(tmp_path / "dev.json", relation_lines(40, 2)), "max_length": 24,
                       "window_overlap": 8},
              "model": {"encoder": "tiny", "head_size": 16, "head": "efficient_global_pointer"},
              "train": {"epochs": 8, "batch_size": 16, "lr": 2e-3, "head_lr": 2e-3, "warmup_ratio": 0.05, "seed": 7,
                        "patience": 0, "layer_lr_decay": 1.0, "boundary_smoothing": 0.0, "calibrate": "none"},
              "device": "cpu", "output_dir": str(tmp_path / "run")}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    train(load_config(str(tmp_path / "config.yaml")), build=build_peer_relations)
    extractor = extractor_of(str(tmp_path / "run"), build_peer_relations)
    texts = [line["text"] for line in relation_lines(40, 3)]
    pipeline = own_pipeline(extractor)
    found = pipeline.triples(texts)
    assert sum(map(len, found)) >= len(texts) // 2  # the trained peer finds triples: no agreement of empty sets
    assert {predicate for triples in found for _, predicate, _ in triples} <= {"出生地", "就职"}
    assert pipeline_agreement(extractor, pipeline, texts) == 1.0
