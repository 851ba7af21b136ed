"""Label Studio's ML-backend protocol as this backend speaks it: the labeling interface read from a
project's config, the texts of its tasks, predictions in its result format."""
import xml.etree.ElementTree as ElementTree
from typing import List, NamedTuple, Tuple

from ...data.event_formats import as_linked_spans
from ...inference.label_studio import prediction_for



TRAINING_EVENTS = ("START_TRAINING", "ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED")


class Interface(NamedTuple):
    """What the project's labeling interface names: the ``<Labels>`` tag, the ``<Text>`` tag it
    labels, the task field that tag shows, and the labels offered."""
    from_name: str
    to_name: str
    text_field: str
    labels: List[str]
    relations: List[str] = []  # the relation types of its <Relations> tag (none: no relations labelled)


def read_interface(label_config: str) -> Interface:
    """The project's labeling interface (its XML); ValueError naming what is missing."""
    if not isinstance(label_config, str) or not label_config.strip():
        raise ValueError("the request has no label_config (the project's labeling interface)")
    try:
        root = ElementTree.fromstring(label_config)
    except ElementTree.ParseError as error:
        raise ValueError(f"the project's labeling interface is not readable XML ({error})") from None
    texts = {tag.get("name"): tag.get("value", "") for tag in root.iter() if tag.tag in ("Text", "HyperText")}
    for labels in root.iter("Labels"):
        to_name = labels.get("toName", "")
        if to_name in texts and texts[to_name].startswith("$"):
            return Interface(labels.get("name", ""), to_name, texts[to_name][1:],
                             [label.get("value", "") for label in labels.iter("Label")],
                             [relation.get("value", "") for relation in root.iter("Relation")])
    raise ValueError("the project's labeling interface has no <Labels> tag on a <Text> tag; use the one "
                     "`globalpointer predict --label-config FILE` writes")


def task_texts(tasks: list, interface: Interface) -> List[str]:
    """The text of every task, from the field the labeling interface shows; ValueError naming a task without one."""
    texts = []
    for index, task in enumerate(tasks):
        data = task.get("data") if isinstance(task, dict) else None
        text = data.get(interface.text_field) if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise ValueError(f"tasks[{index}] has no text in data.{interface.text_field}, the field the "
                             f"labeling interface shows")
        texts.append(text)
    return texts


def predictions(found: List[Tuple[str, object]], interface) -> List[dict]:
    """Label Studio's prediction of each task from its (model version, {"entities", "certainty"} and a
    relation model's "relations": ``Pipeline.predict_steps(..., certainty=True)``), with the types and
    relation types the project's interface offers (a relation between entities it does not offer is
    left out with them); its score the text's certainty, whatever the project offers."""
    offered, linked = set(interface.labels), set(interface.relations)
    out = []
    for version, item in found:
        item = as_linked_spans(item) if "events" in item else item
        entities, relations = item["entities"], item.get("relations", [])
        kept = [index for index, entity in enumerate(entities) if entity["type"] in offered]
        renumber = {old: new for new, old in enumerate(kept)}
        relations = [{**r, "head": renumber[r["head"]], "tail": renumber[r["tail"]]} for r in relations
                     if r["type"] in linked and r["head"] in renumber and r["tail"] in renumber]
        out.append(prediction_for([entities[i] for i in kept], item["certainty"], version, interface.from_name,
                                  interface.to_name, relations))
    return out
