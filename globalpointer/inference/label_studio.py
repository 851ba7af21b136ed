"""Predictions as Label Studio tasks with pre-annotations, so a team corrects the model's output
instead of labelling from scratch, and labelled records as tasks with annotations (``convert``);
reading Label Studio's exports back is ``data/readers.py``, the live backend
``deploy/label_studio_backend/``.

A task is ``{"data": {"text", ...}, "predictions": [{"model_version", "score", "result": [...]}]}``;
each result is a ``labels`` region ``{"start", "end", "text", "labels": [TYPE]}`` with its score,
offsets in code points, end exclusive, as current Label Studio writes them.
"""
import logging
from typing import List, Optional, Sequence
from xml.sax.saxutils import quoteattr

from ..data.event_formats import tool_relation_types
from ..files import atomic_write_text

log = logging.getLogger("globalpointer")

FROM_NAME = "label"  # the names of the <Labels> and <Text> tags in labeling_config()
TO_NAME = "text"


def prediction_for(entities: Sequence[dict], certainty: float, model_version: str, from_name: str = FROM_NAME,
                   to_name: str = TO_NAME, relations: Sequence[dict] = ()) -> dict:
    """One text's entity dicts -> a Label Studio prediction of ``labels`` regions (the tags of the
    project's interface named by ``from_name`` / ``to_name``), and a relation model's relation dicts
    (``head`` and ``tail`` indexing ``entities``) as ``relation`` results between them.  Its score is
    the text's ``certainty`` (``doubt.certainty``), given a text without entities too, so sorting tasks
    by it (Label Studio's uncertainty sampling) puts the texts most worth labelling first."""
    return {"model_version": model_version, "score": certainty,
            "result": _results(entities, relations, from_name, to_name, predicted=True)}


def _results(entities: Sequence[dict], relations: Sequence[dict], from_name: str, to_name: str,
             predicted: bool) -> List[dict]:
    """A ``labels`` region per entity dict and a ``relation`` result per relation dict between two of
    them; a prediction's carry their scores."""
    def scored(result: dict, item: dict) -> dict:
        return {**result, "origin": "prediction", "score": item["score"]} if predicted else result

    results = [scored({"id": f"gp{index}", "from_name": from_name, "to_name": to_name, "type": "labels",
                       "value": {"start": entity["start"], "end": entity["end"], "text": entity["text"],
                                 "labels": [entity["type"]]}}, entity)
               for index, entity in enumerate(entities)]
    return results + [scored({"from_id": f"gp{relation['head']}", "to_id": f"gp{relation['tail']}",
                              "type": "relation", "direction": "right", "labels": [relation["type"]]}, relation)
                      for relation in relations]


def label_studio_task(payload: dict, model_version: str) -> dict:
    """One predict.py output payload (``text``, ``entities``, ``certainty``, other input fields, maybe
    ``error``) -> a task with the entities as its prediction; a line that could not be read keeps its
    ``error`` in the data and gets no prediction."""
    data = {key: value for key, value in payload.items() if key not in ("entities", "relations", "certainty")}
    if "error" in payload:
        return {"data": data}
    return {"data": data, "predictions": [prediction_for(payload.get("entities") or [], payload["certainty"],
                                                         model_version, relations=payload.get("relations") or ())]}


def annotated_task(payload: dict, model_version: str = "") -> dict:
    """A labelled record's payload (``text``, ``entities`` and maybe ``relations``, as the project's JSON
    lines hold them) -> a task whose one annotation is that labelling, which Label Studio imports as
    done work (and exports back as it reads it)."""
    data = {key: value for key, value in payload.items() if key not in ("entities", "relations")}
    return {"data": data, "annotations": [{"result": _results(payload.get("entities") or [],
                                                              payload.get("relations") or [], FROM_NAME, TO_NAME,
                                                              predicted=False)}]}


def labeling_config(labels: Sequence[str], relations: Sequence[str] = ()) -> str:
    """The Label Studio project's labeling interface for these tasks: every type the model knows (and a
    relation model's relation types, as ``<Relations>``; an event model's roles, ``tool_relation_types``)."""
    relations = tool_relation_types(labels, relations)
    lines: List[str] = ["<View>"]
    if relations:
        lines += ["  <Relations>"] + [f"    <Relation value={quoteattr(kind)}/>" for kind in relations] + ["  </Relations>"]
    lines += [f'  <Labels name="{FROM_NAME}" toName="{TO_NAME}">']
    lines += [f"    <Label value={quoteattr(label)}/>" for label in labels]
    lines += ["  </Labels>", f'  <Text name="{TO_NAME}" value="${TO_NAME}"/>', "</View>"]
    return "\n".join(lines)


def offer_labeling_config(labels: Sequence[str], path: Optional[str], tasks_written: bool,
                          relations: Sequence[str] = ()) -> None:
    """The labeling interface for ``labels`` (and ``relations``): written to ``path`` (predict's
    --label-config), else logged where predict writes Label Studio tasks, which need it to be imported."""
    if path:
        atomic_write_text(path, labeling_config(labels, relations) + "\n")
        log.info("wrote %s: the Label Studio labeling interface for these predictions", path)
    elif tasks_written:
        log.info("Label Studio labeling config for these tasks (--label-config FILE writes it):\n%s",
                 labeling_config(labels, relations))
