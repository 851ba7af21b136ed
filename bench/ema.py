"""An exponential moving average of the weights, for the relation study only: ``train.ema_decay`` was
removed after it lost on the entity sets (docs/results.md), and the published GPLinker trains with one
(bert4keras' AdamEMA, 0.999), so whether it earns on relations is measured here before it may return.

``averaged_weights(decay)`` is a context in which ``globalpointer.training.loop.train`` keeps a shadow
copy of the trainable weights, shadow = d * shadow + (1 - d) * weights after every optimizer step with
d = min(decay, (1 + t) / (10 + t)) at update t (early shadows are not stuck at the initial weights), and
evaluates and saves the shadow: the dev F1, best/ and last/ are the average's (the bench never resumes).
"""
import contextlib
from unittest import mock

import globalpointer  # noqa: F401  first: it quiets the warnings Paddle prints on import
import paddle

from globalpointer.training import loop


class EMA:
    """The shadow of ``network``'s trainable weights."""

    def __init__(self, network, decay: float):
        self.decay, self.updates = decay, 0
        self.shadow = {name: p.detach().clone() for name, p in network.named_parameters() if not p.stop_gradient}

    def rate(self) -> float:
        return min(self.decay, (1 + self.updates) / (10 + self.updates))

    @paddle.no_grad()
    def update(self, network) -> None:
        d = self.rate()
        self.updates += 1
        for name, parameter in network.named_parameters():
            if name in self.shadow:
                self.shadow[name].scale_(d).add_(parameter.detach() * (1 - d))

    @contextlib.contextmanager
    def applied(self, network):
        """``network`` holds the shadow inside, its own weights again after."""
        parameters = dict(network.named_parameters())
        trained = {name: parameters[name].detach().clone() for name in self.shadow}
        with paddle.no_grad():
            for name, value in self.shadow.items():
                parameters[name].set_value(value)
        try:
            yield
        finally:
            with paddle.no_grad():
                for name, value in trained.items():
                    parameters[name].set_value(value)


@contextlib.contextmanager
def averaged_weights(decay: float):
    """``loop.train`` with an EMA of the weights updated after each step, evaluated and saved."""
    class AveragingStepper(loop.Stepper):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.ema = EMA(self.network, decay)

        def update(self) -> None:
            super().update()
            self.ema.update(self.network)

    evaluate_and_save = loop.evaluate_and_save

    def evaluate_and_save_average(state, train_loss: float, stop) -> bool:
        with state.stepper.ema.applied(state.network):
            return evaluate_and_save(state, train_loss, stop)

    with mock.patch.object(loop, "Stepper", AveragingStepper), \
            mock.patch.object(loop, "evaluate_and_save", evaluate_and_save_average):
        yield
