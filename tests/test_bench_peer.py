"""bench/peer.py's PaddleNLPRelationPipeline, PaddleNLP's GPLinker as its Taskflow predicts with it
(tokenizer with offsets, padded batches, the layer's forward, ``gp_decode``): on the same trained network
it gives the triples this project's Extractor gives, so the prediction speed the comparison reports for
it is of the same answers."""
import pytest
from peer import build_peer_relations
from synthetic import relation_config, relation_lines
from vs_paddlenlp_relations import extractor_of, own_pipeline, pipeline_agreement


@pytest.mark.slow  # trains models of its own
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


def test_the_published_pair_heads_score_without_rope_beside_our_entity_heads_rope():
    """The bench's ``published-pair-heads`` models, the runs without RoPE in the pair heads that the docs
    compare with: their pair planes are the Efficient GlobalPointer's without RoPE (the independent
    formula), their entity planes are this project's, RoPE and all."""
    import numpy as np
    import paddle

    from globalpointer.model import reference
    from globalpointer.config.schema import ModelConfig
    from globalpointer.model.encoders import build_tiny
    from globalpointer.model.network import build_network
    from vs_paddlenlp_relations import build_with_published_pair_heads

    types, relations, length = 2, 3, 7
    x = paddle.randn([2, length, 16])
    span_text = paddle.to_tensor([[0, 1, 1, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0]])
    for build, pair_rope in ((build_with_published_pair_heads, False), (build_network, True)):
        paddle.seed(5)
        head = build(ModelConfig(head="efficient_global_pointer", head_size=4), build_tiny(16, 1, 2), types,
                     relations).head
        logits = head(x, span_text).numpy()
        entity = head.entity
        np.testing.assert_allclose(logits[:, :types], reference.efficient_global_pointer_scores(
            x.numpy(), entity.dense.weight.numpy(), entity.dense.bias.numpy(), entity.bias_dense.weight.numpy(),
            entity.bias_dense.bias.numpy(), types, 4, use_rope=True, span_text=span_text.numpy() > 0),
            rtol=1e-4, atol=1e-4)
        for offset, pair in ((types, head.starts), (types + relations, head.ends)):
            np.testing.assert_allclose(logits[:, offset:offset + relations], reference.efficient_global_pointer_scores(
                x.numpy(), pair.dense.weight.numpy(), pair.dense.bias.numpy(), pair.bias_dense.weight.numpy(),
                pair.bias_dense.bias.numpy(), relations, 4, use_rope=pair_rope, span_text=span_text.numpy() > 0,
                tril_mask=False), rtol=1e-4, atol=1e-4)


def test_training_is_timed_in_turns_one_epoch_at_a_time(tmp_path, capsys):
    """``--time-training``: each model trains one epoch per round, the models in turns (a, b, a, b)."""
    import json

    from vs_paddlenlp_relations import PEER, training_rates

    config = relation_config(tmp_path, train_lines=40, dev_lines=10)
    names = ["ours efficient_global_pointer", PEER]
    rates = training_rates(config, [], names, 2, str(tmp_path / "bench"))
    assert set(rates) == set(names) and all(rate > 0 for rate in rates.values())
    timed = [line.split(":")[0] for line in capsys.readouterr().err.splitlines() if "training windows/s" in line]
    assert timed == names + names
    for name in names:
        summary = json.loads((tmp_path / "bench" / "timing" / name.replace(" ", "-") / "summary.json").read_text())
        assert summary["epochs_completed"] == 1
