"""One self-contained HTML page (no network) drawing texts with their entities.

``evaluate.py --html`` draws gold and predicted entities of every text, marks each error (missed,
spurious, wrong type, wrong boundary) and opens with the counts of each kind and the type-confusion
table; ``predict.py --html`` draws predictions only.  A text is a row of segments cut at every
entity boundary; under each segment, one lane per level of nesting shows the entities covering it
in their type's colour, so nested and crossing entities stack instead of hiding each other.
"""
import html
import itertools
import logging
import unicodedata
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..files import atomic_write_text
from ..spans import Entity, Record
from .metrics import ERROR_KINDS, Judgement, judge_text
from .relations import entities_found_line

log = logging.getLogger("globalpointer")

ERROR_COLOUR = "#d62728"  # the outline of every error; no type is drawn in a red it could be taken for
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#6b6ecf", "#bab0ac", "#17becf",
           "#86bcb6", "#8cd17d", "#b6992d", "#499894", "#bcbd22", "#1f3b73", "#a0cbe8")
KIND_TEXT = {"correct": "correct", "missed": "missed", "spurious": "spurious", "wrong_type": "wrong type",
             "wrong_boundary": "wrong boundary"}

STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px;margin:0 0 4px}.meta{color:#666;font-size:13px;margin-bottom:16px}
table{border-collapse:collapse;font-size:13px;margin:8px 0 16px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}.diag{background:#e8f3e8}.off{background:#fbe3e3}
.counts span{display:inline-block;margin-right:14px;font-size:15px}.counts b{font-size:18px}
.legend span{display:inline-block;margin:0 10px 4px 0;font-size:12px}.swatch{display:inline-block;width:12px;height:12px;
border-radius:2px;vertical-align:middle;margin-right:3px}
.filters button{margin:0 6px 12px 0;padding:3px 10px;border:1px solid #aaa;background:#f6f6f6;border-radius:4px;cursor:pointer}
.filters button.on{background:#333;color:#fff}
.text{border-top:1px solid #eee;padding:10px 0;line-height:1.2}.text .id{color:#999;font-size:11px;margin-bottom:4px}
.seg{display:inline-flex;flex-direction:column;vertical-align:top;margin-bottom:4px}.seg>.t{white-space:pre}
.plain{white-space:pre-wrap;vertical-align:top}
.lane{height:7px;margin-top:2px;position:relative}.lane.gold{height:4px;opacity:.55}
.lane.sep{border-top:1px dashed #bbb;margin-top:3px;padding-top:2px}
.bar{position:absolute;left:0;right:0;top:0;bottom:0}.bar.first{border-top-left-radius:3px;border-bottom-left-radius:3px;left:1px}
.bar.last{border-top-right-radius:3px;border-bottom-right-radius:3px;right:1px}
.tag{font-size:9px;line-height:10px;height:10px;color:#555;white-space:nowrap;width:0;overflow:visible}
.bar.missed{background-image:repeating-linear-gradient(45deg,rgba(255,255,255,.7) 0 2px,transparent 2px 5px);
outline:1px dashed ERROR;outline-offset:1px}
.bar.spurious,.bar.wrong_type,.bar.wrong_boundary{outline:2px solid ERROR;outline-offset:-1px}
.mark{color:ERROR;font-weight:bold}
""".replace("ERROR", ERROR_COLOUR)

SCRIPT = """
const rows=[...document.querySelectorAll('.text')];
function show(kind,button){document.querySelectorAll('.filters button').forEach(b=>b.classList.toggle('on',b===button));
 let n=0;rows.forEach(r=>{const v=kind==='all'||(r.dataset.kinds||'').split(' ').includes(kind);r.style.display=v?'':'none';n+=v;});
 document.getElementById('shown').textContent=n;}
document.querySelectorAll('.filters button').forEach(b=>b.addEventListener('click',()=>show(b.dataset.kind,b)));
show('all',document.querySelector('.filters button'));document.body.dataset.rendered=rows.length;
"""


def colours(labels: Sequence[str]) -> Dict[str, str]:
    return {label: PALETTE[index % len(PALETTE)] for index, label in enumerate(labels)}


def lanes(entities: Sequence[Entity]) -> List[List[Entity]]:
    """Greedy interval colouring: longest first within a start, each entity in the first lane it fits."""
    placed: List[List[Entity]] = []
    for entity in sorted(entities, key=lambda e: (e.start, -(e.end - e.start), e.type)):
        for lane in placed:
            if all(entity.start >= other.end or entity.end <= other.start for other in lane):
                lane.append(entity)
                break
        else:
            placed.append([entity])
    return placed


def _cuts(text: str, entities: Sequence[Entity]) -> List[Tuple[int, int]]:
    points = sorted({0, len(text)} | {e.start for e in entities} | {e.end for e in entities})
    return [(a, b) for a, b in zip(points, points[1:]) if b > a]


def _title(judgement: Judgement, text: str) -> str:
    entity = judgement.entity
    words = f"{'gold' if judgement.gold else 'predicted'} {entity.type} [{entity.start}, {entity.end}) " \
            f"{text[entity.start:entity.end]!r}"
    if not judgement.gold:
        words += f" score {entity.score:.3f}"
    if judgement.kind != "correct":
        words += f": {KIND_TEXT[judgement.kind]}"
        if judgement.partner is not None:
            words += f" (gold {judgement.partner.type} [{judgement.partner.start}, {judgement.partner.end}))"
    return words


class Label(NamedTuple):
    """What is written under the first segment of an entity."""
    words: str  # its type, and for a wrong type the gold type it should have been
    error: bool  # marked as an error

    @property
    def text(self) -> str:
        return self.words + (MARK if self.error else "")

    def html(self) -> str:
        mark = f"<span class=mark>{MARK}</span>" if self.error else ""
        return f'<span class="l">{html.escape(self.words)}{mark}</span>'


MARK = " ✗"


def _label(judgement: Judgement, predictions_drawn: bool) -> Optional[Label]:
    """The label of an entity, readable without hovering; None for a correct gold entity whose
    prediction under it carries the same label."""
    if judgement.gold and judgement.kind == "correct" and predictions_drawn:
        return None
    words = judgement.entity.type
    if judgement.kind == "wrong_type" and judgement.partner is not None:
        words += f" (gold {judgement.partner.type})"
    return Label(words, judgement.kind != "correct")


# Widths in ems, for placing labels without measuring them.  Each errs towards labels wider and text
# narrower than drawn, so two labels placed apart never touch: Chromium without a CJK font draws Chinese
# at 0.6 em (with one, 1 em), and the labels' lower-case at about 0.65 em.
TEXT_PX, TAG_PX = 16, 9  # the text at the browser's default size, the labels as STYLE sets them
TEXT_EM = {"wide": 0.55, "narrow": 0.45}
TAG_EM = {"wide": 1.0, "narrow": 0.75}


def _widths(text: str, size: float, ems: Dict[str, float]) -> List[float]:
    return [size * ems["wide" if unicodedata.east_asian_width(c) in "WF" else "narrow"] for c in text]


def label_rows(lefts: Sequence[float], lane: Sequence[Entity],
               labels: Dict[Entity, Optional[Label]]) -> Tuple[Dict[Entity, int], int]:
    """The row under ``lane`` each label goes in, and how many rows: a label runs on to the right of
    its entity's first segment without widening it (the text stays together), so a label that would
    reach the next label of its row goes one row down.  ``lefts``: where each character of the text
    starts, in pixels."""
    row_ends: List[float] = []
    row_of: Dict[Entity, int] = {}
    for entity in sorted(lane, key=lambda e: e.start):
        if labels.get(entity) is None:
            continue
        left = lefts[entity.start]
        right = left + sum(_widths(labels[entity].text, TAG_PX, TAG_EM)) + 4
        row = next((number for number, end in enumerate(row_ends) if end <= left), len(row_ends))
        row_ends[row:row + 1] = [right]
        row_of[entity] = row
    return row_of, max(1, len(row_ends))


def render_text(index: int, text: str, judged: Sequence[Judgement], palette: Dict[str, str], source: str = "") -> str:
    """One text: its segments, gold lanes above a dashed line, predicted lanes under it.  Under each
    lane, rows of labels (``label_rows``): a label does not widen its segment, and no two overlap."""
    groups = [[j for j in judged if j.gold], [j for j in judged if not j.gold]]
    kind_of = {(j.gold, j.entity): j for j in judged}
    lane_sets = [lanes([j.entity for j in group]) for group in groups]
    lefts = list(itertools.accumulate(_widths(text, TEXT_PX, TEXT_EM), initial=0.0))
    placed = {}
    for gold, lane_set in zip((True, False), lane_sets):
        for lane in lane_set:
            labels = {e: _label(kind_of[(gold, e)], bool(lane_sets[1])) for e in lane}
            placed[(gold, id(lane))] = (labels, *label_rows(lefts, lane, labels))
    cells = []
    for start, end in _cuts(text, [j.entity for j in judged]):
        piece = html.escape(text[start:end])
        covered = any(e.start < end and start < e.end for j in judged for e in [j.entity])
        if not covered:
            cells.append(f'<span class="plain">{piece}</span>')
            continue
        rows = []
        for gold, lane_set in zip((True, False), lane_sets):
            for number, lane in enumerate(lane_set):
                labels, row_of, row_count = placed[(gold, id(lane))]
                entity = next((e for e in lane if e.start < end and start < e.end), None)
                lane_class = "lane gold" if gold else "lane sep" if number == 0 and lane_sets[0] else "lane"
                starts_here = entity is not None and entity.start == start
                tags = [labels[entity].html() if starts_here and row_of.get(entity) == row else ""
                        for row in range(row_count)]
                tag_rows = "".join(f'<div class="tag">{tag}</div>' for tag in tags)
                if entity is None:
                    rows.append(f'<div class="{lane_class}"></div>{tag_rows}')
                    continue
                judgement = kind_of[(gold, entity)]
                classes = ["bar", judgement.kind] + (["first"] if starts_here else []) + \
                          (["last"] if entity.end == end else [])
                rows.append(f'<div class="{lane_class}"><div class="{" ".join(classes)}" '
                            f'style="background-color:{palette.get(entity.type, "#999")}" '
                            f'title="{html.escape(_title(judgement, text))}"></div></div>{tag_rows}')
        cells.append(f'<span class="seg"><span class="t">{piece}</span>{"".join(rows)}</span>')
    kinds = sorted({j.kind for j in judged if j.kind != "correct"})
    label = html.escape(source or f"text {index + 1}")
    return (f'<div class="text" data-kinds="{" ".join(kinds)}"><div class="id">{label}'
            f'{" — " + ", ".join(KIND_TEXT[k] for k in kinds) if kinds else ""}</div>{"".join(cells)}</div>')


def _confusion_table(confusion: Dict[str, Dict[str, int]], labels: Sequence[str]) -> str:
    predicted_types = list(labels) + sorted({p for row in confusion.values() for p in row} - set(labels))
    head = "".join(f"<th>{html.escape(p)}</th>" for p in predicted_types)
    body = []
    for gold_type in labels:
        row = confusion.get(gold_type, {})
        cells = "".join(f'<td class="{"diag" if p == gold_type else "off" if row.get(p) else ""}">{row.get(p, "")}</td>'
                        for p in predicted_types)
        body.append(f"<tr><th>{html.escape(gold_type)}</th>{cells}</tr>")
    return (f"<table><tr><th>gold \\ predicted</th>{head}</tr>{''.join(body)}</table>"
            f'<div class="meta">Predictions with a gold span\'s exact boundaries: the diagonal is correct, '
            f"the rest wrong types.</div>")


def _relation_table(relations: dict) -> str:
    """A relation model's strict triple scores per relation type, micro, DuIE's string level, and the
    wrong triples by kind (``evaluation.relations.relation_report``)."""
    rows = list(relations["per_type"].items()) + [("micro (strict)", relations["micro"]),
                                                   ("micro (string, DuIE)", relations["string"])]
    body = "".join(f"<tr><th>{html.escape(name)}</th>" + "".join(f"<td>{row[k] * 100:.2f}</td>" for k in
                                                                 ("precision", "recall", "f1"))
                   + f"<td>{row['support']}</td><td>{row['predicted']}</td></tr>" for name, row in rows)
    errors = ", ".join(f"{kind.replace('_', ' ')} {count}" for kind, count in relations["errors"].items())
    return (f"<h2>Relations</h2><table><tr><th>relation</th><th>precision</th><th>recall</th><th>F1</th>"
            f"<th>gold</th><th>predicted</th></tr>{body}</table>"
            f'<div class="meta">Wrong triples: {html.escape(errors)}; {html.escape(entities_found_line(relations))}. '
            f"The texts below draw the entities.</div>")


def _reliability_table(result: dict, what: str) -> str:
    """The scores' calibration (``evaluation.reliability``): a row per bin that holds items."""
    body = "".join(f"<tr><th>{row['from']:.1f} to {row['to']:.1f}</th><td>{row['items']}</td>"
                   f"<td>{row['mean_score']:.3f}</td><td>{row['accuracy']:.3f}</td></tr>" for row in result["bins"])
    return (f"<h2>Calibration of the {what}' scores</h2><table><tr><th>score</th><th>predicted</th>"
            f"<th>mean score</th><th>right</th></tr>{body}</table>"
            f'<div class="meta">Of the {what} scored about s, a share s should be right: ECE {result["ece"]:.3f} (the '
            f"bins' gaps weighted by their items), MCE {result['mce']:.3f} (the largest gap).</div>")


def render_page(title: str, texts: Sequence[str], predicted: Sequence[Sequence[Entity]], labels: Sequence[str],
                gold: Optional[Sequence[Sequence[Entity]]] = None, summary: Optional[dict] = None,
                meta: str = "", sources: Sequence[str] = (), relations: Optional[dict] = None,
                calibration: Optional[dict] = None) -> str:
    """The page; with ``gold``, errors are judged and ``summary`` (``metrics.error_summary``) heads it;
    ``relations``: a relation model's ``relation_report``, its table after the entities'; ``calibration``:
    the entities' ``reliability`` (and ``relations``' own), a table each."""
    palette = colours(labels)
    blocks = []
    for index, text in enumerate(texts):
        if gold is None:
            judged = [Judgement(e, False, "correct") for e in predicted[index]]
        else:
            judged = judge_text(gold[index], predicted[index])
        blocks.append(render_text(index, text, judged, palette, sources[index] if sources else ""))
    legend = "".join(f'<span><span class="swatch" style="background:{c}"></span>{html.escape(t)}</span>'
                     for t, c in palette.items())
    head = [f"<h1>{html.escape(title)}</h1>", f'<div class="meta">{html.escape(meta)}</div>']
    kinds = ("all",)
    if summary is not None:
        counts = summary["counts"]
        head.append('<div class="counts">' + "".join(f"<span><b>{counts[k]}</b> {KIND_TEXT[k]}</span>"
                                                     for k in ("correct",) + ERROR_KINDS) + "</div>")
        head.append(_confusion_table(summary["confusion"], labels))
        head.append('<div class="meta">Each text: gold entities as thin pale bars above the dashed line, predictions '
                    'as thick bars below it, each in its type\'s colour. Hatched with a dashed red outline: missed '
                    'gold; solid red outline: spurious, wrong type (its label names the gold type) or wrong '
                    'boundary, and the gold span it was taken for (hover over a bar for details).</div>')
        kinds += ERROR_KINDS
    if calibration and calibration["items"]:
        head.append(_reliability_table(calibration, "entities"))
    if relations is not None:
        head.append(_relation_table(relations))
        if relations.get("calibration", {}).get("items"):
            head.append(_reliability_table(relations["calibration"], "triples"))
    # one button per kind of error; a page without gold has nothing to filter
    buttons = "".join(f'<button data-kind="{k}">{KIND_TEXT.get(k, k)}</button>' for k in kinds if len(kinds) > 1)
    head.append(f'<div class="legend">{legend}</div><div class="filters">{buttons}'
                f'<span class="meta"><span id="shown">{len(texts)}</span> of {len(texts)} texts shown</span></div>')
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{''.join(head)}{''.join(blocks)}"
            f"<script>{SCRIPT}</script></body></html>")


def write_evaluation_page(path: str, records: Sequence[Record], predicted: Sequence[List[Entity]],
                          labels: Sequence[str], report: dict) -> None:
    """``evaluate --html``: every text with its gold and predicted entities, the report's counts on top."""
    micro = report["micro"]
    meta = (f"{report['model']} on {report['data']}: {len(records)} texts, precision {micro['precision'] * 100:.2f}, "
            f"recall {micro['recall'] * 100:.2f}, F1 {micro['f1'] * 100:.2f}")
    atomic_write_text(path, render_page("Evaluation", [r.text for r in records], predicted, labels,
                                        [r.entities for r in records], report["errors"], meta,
                                        [r.source for r in records], report.get("relations"),
                                        report.get("calibration")))
    log.info("wrote %s", path)


def write_prediction_page(path: str, payloads: Sequence[dict], labels: Sequence[str], meta: str) -> None:
    """``predict --html``: the texts of ``payloads`` (predict's output lines) with their entities."""
    texts = [payload["text"] for payload in payloads]
    predicted = [[Entity(e["start"], e["end"], e["type"], e["score"]) for e in payload.get("entities", [])]
                 for payload in payloads]
    atomic_write_text(path, render_page("Predictions", texts, predicted, labels, meta=meta))
    log.info("wrote %s", path)
