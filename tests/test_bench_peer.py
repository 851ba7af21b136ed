"""bench/peer.py's PaddleNLPRelationPipeline, PaddleNLP's GPLinker as its Taskflow predicts with it
(tokenizer with offsets, padded batches, the layer's forward, ``gp_decode``): on the same trained network
it gives the triples this project's Extractor gives, so the prediction speed the comparison reports for
it is of the same answers."""
from peer import build_peer_relations
from synthetic import relation_config, relation_lines
from vs_paddlenlp_relations import extractor_of, own_pipeline, pipeline_agreement


def test_the_peers_own_pipeline_gives_our_extractors_triples(tmp_path):
    from globalpointer.config import load_config
    from globalpointer.training.loop import train

    config = relation_config(tmp_path, model__head="efficient_global_pointer", train__calibrate="none")
    train(load_config(config), build=build_peer_relations)
    extractor = extractor_of(str(tmp_path / "run"), build_peer_relations)
    texts = [line["text"] for line in relation_lines(40, 3)]
    pipeline = own_pipeline(extractor)
    found = pipeline.triples(texts)
    assert sum(map(len, found)) >= len(texts) // 2  # the trained peer finds triples: no agreement of empty sets
    assert {predicate for triples in found for _, predicate, _ in triples} <= {"出生地", "就职"}
    assert pipeline_agreement(extractor, pipeline, texts) == 1.0
