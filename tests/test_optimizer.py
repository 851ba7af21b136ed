"""Each parameter group learns at its own rate: the encoder's train.lr, the head's train.head_lr."""
import numpy as np
import paddle

from globalpointer.config import load_config
from globalpointer.model.encoders import build_tiny
from globalpointer.model.network import build_network
from globalpointer.training.step import build_optimizer


def one_step(lr, head_lr):
    paddle.seed(0)
    config = load_config(None, [f"train.lr={lr}", f"train.head_lr={head_lr}", "train.warmup_ratio=0",
                                "train.weight_decay=0", "model.head_size=8"])
    encoder = build_tiny(hidden_size=16, layers=1)
    model = build_network(config.model, encoder, 2)
    optimizer, _ = build_optimizer(model, config, total_steps=10)
    before = {name: value.numpy().copy() for name, value in model.named_parameters()}
    ids = paddle.to_tensor([[2, 10, 11, 12, 3]])
    logits = model(ids, paddle.ones_like(ids), paddle.to_tensor([[False, True, True, True, False]]))
    loss, _ = model.head.loss(logits, paddle.to_tensor([[[0, 1, 2]]]), paddle.to_tensor([[False, True, True, True, False]]))
    loss.backward()
    optimizer.step()
    # Adam's first step moves every parameter with a gradient by about its group's rate
    return {name: float(np.abs(value.numpy() - before[name]).max()) for name, value in model.named_parameters()}


def test_frozen_encoder_trains_the_head():
    moved = one_step(lr=0.0, head_lr=1e-2)
    assert all(moved[name] == 0.0 for name in moved if name.startswith("encoder."))
    assert all(0.005 < moved[name] <= 0.0101 for name in moved if name.startswith("head."))


def test_each_group_moves_by_its_own_rate():
    moved = one_step(lr=1e-3, head_lr=1e-2)
    encoder = max(v for k, v in moved.items() if k.startswith("encoder.embeddings.word"))
    head = max(v for k, v in moved.items() if k.startswith("head."))
    assert 0.0005 < encoder <= 0.00101 and 0.005 < head <= 0.0101
