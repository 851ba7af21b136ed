"""The model as a Label Studio ML backend: ``globalpointer label-studio-backend --model RUN/best``.

Label Studio's ML-backend protocol (the one its ``label-studio-ml`` package serves):

- ``GET /health`` answers at once, whatever the model is doing (Label Studio waits 1 s).
- ``POST /setup`` ``{"project", "schema", "hostname", "access_token"}`` -> ``{"model_version"}``.
  Label Studio's address and token, which a training round uses to fetch the project's annotations,
  come from the command line and the environment (``--label-studio-url``, ``LABEL_STUDIO_API_KEY``);
  ``/setup`` supplies them only to a backend that requires basic authentication, both together and
  once (``LabelStudioConnection``): an unauthenticated caller never chooses where the token goes.
- ``POST /predict`` ``{"tasks", "label_config"}`` -> ``{"results": [prediction per task]}``.  Each
  prediction holds ``labels`` regions named as in the project's interface, a score per region, the
  task's score (its least certain region: Label Studio's uncertainty sampling opens the lowest first)
  and the ``model_version``.
- ``POST /webhook`` with ``START_TRAINING`` (the project's "Start training", or every N annotations)
  or an ``ANNOTATION_*`` event starts a training round in the background and answers at once.

A round fetches the project's annotated tasks through Label Studio's export API, writes them beside
the base config's training texts into ``WORK_DIR/round-NNN/``, and runs ``globalpointer train`` there
in its own process.  A project whose labeling interface offers only some of the model's types makes
its annotations a data entry declaring those types, so they teach nothing about the others.  The
served model keeps answering; only once the new checkpoint is written is it
loaded and swapped in, and ``/setup`` and every prediction then carry its ``model_version`` (its
directory).  A round that fails leaves the served model as it was; events that come while a round
runs start one more round after it.

Every request passes the layer of ``http.py`` that ``serve`` passes too (bounds answered 413/431,
authentication, predictions through the micro-batcher, work dropped when its client leaves, SIGTERM
within ``serve.shutdown_timeout_s``).
"""
from .app import create_app, run_backend
from .connection import label_studio_address
from .protocol import read_interface
from .rounds import offered_only, round_data

__all__ = ["create_app", "label_studio_address", "offered_only", "read_interface", "round_data", "run_backend"]
