"""Predictions as Label Studio tasks with pre-annotations, so a team corrects the model's output
instead of labelling from scratch (reading Label Studio's exports back is ``data/readers.py``).

A task is ``{"data": {"text", ...}, "predictions": [{"model_version", "score", "result": [...]}]}``;
each result is a ``labels`` region ``{"start", "end", "text", "labels": [TYPE]}`` with its score,
offsets in code points, end exclusive, as current Label Studio writes them.
"""
from typing import List, Sequence
from xml.sax.saxutils import quoteattr

FROM_NAME = "label"  # the names of the <Labels> and <Text> tags in labeling_config()
TO_NAME = "text"


def label_studio_task(payload: dict, model_version: str) -> dict:
    """One predict.py output payload (``text``, ``entities``, other input fields, maybe ``error``)
    -> a task.  The prediction's score is its least certain entity's, so sorting tasks by it in
    Label Studio puts the texts most worth checking first; a line that could not be read keeps its
    ``error`` in the data and gets no prediction."""
    data = {key: value for key, value in payload.items() if key != "entities"}
    if "error" in payload:
        return {"data": data}
    results = [{"id": f"gp{index}", "from_name": FROM_NAME, "to_name": TO_NAME, "type": "labels",
                "origin": "prediction", "score": entity["score"],
                "value": {"start": entity["start"], "end": entity["end"], "text": entity["text"],
                          "labels": [entity["type"]]}}
               for index, entity in enumerate(payload.get("entities") or [])]
    prediction = {"model_version": model_version, "result": results}
    if results:
        prediction["score"] = min(result["score"] for result in results)
    return {"data": data, "predictions": [prediction]}


def labeling_config(labels: Sequence[str]) -> str:
    """The Label Studio project's labeling interface for these tasks: every type the model knows."""
    lines: List[str] = ["<View>", f'  <Labels name="{FROM_NAME}" toName="{TO_NAME}">']
    lines += [f"    <Label value={quoteattr(label)}/>" for label in labels]
    lines += ["  </Labels>", f'  <Text name="{TO_NAME}" value="${TO_NAME}"/>', "</View>"]
    return "\n".join(lines)
