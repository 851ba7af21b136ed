"""Relations (GPLinker): the readers of relation data, the pair head's loss and decoding against plain
formulas, strict and string-level triple scores, and a relation model from train to predict and load."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import paddle
import pytest
from hypothesis import given, settings, strategies as st

from globalpointer.data.readers import read_records, write_jsonl_records
from globalpointer.errors import DataError
from globalpointer.evaluation.relations import judge_relations, relation_report, string_triples
from globalpointer.model import reference
from globalpointer.data.batching import split_row
from globalpointer.model.relation_head import PairCell, RelationHead, pair_cells, relation_pairs
from globalpointer.spans import Entity, Record, Relation, TokenSpan
from helpers import ROOT, label_studio_links, label_studio_tasks, triples
from synthetic import relation_lines, write_lines

DUIE_LINE = {"text": "2011年，36岁的张智尧在《楚留香新传》里饰演楚留香，依旧帅气", "spo_list": [
    {"predicate": "主演", "object_type": {"@value": "人物"}, "subject_type": "影视作品", "object": {"@value": "张智尧"},
     "subject": "楚留香新传"},
    {"predicate": "饰演", "object_type": {"inWork": "影视作品", "@value": "人物"}, "subject_type": "娱乐人物",
     "object": {"inWork": "楚留香新传", "@value": "楚留香"}, "subject": "张智尧"}]}


def test_duie_lines_are_read_with_their_complex_objects_as_slot_relations(tmp_path):
    record, = read_records(write_lines(tmp_path / "duie.json", [DUIE_LINE]))
    assert triples(record) == [("张智尧", "娱乐人物", "饰演", "楚留香", "人物"),
                               ("张智尧", "娱乐人物", "饰演@inWork", "楚留香新传", "影视作品"),
                               ("楚留香新传", "影视作品", "主演", "张智尧", "人物")]
    # "楚留香" occurs twice (alone and in the title): the first occurrence is taken
    role = next(r for r in record.relations if r.type == "饰演")
    assert role.tail.start == record.text.index("楚留香")
    assert all(e in record.entities for r in record.relations for e in (r.head, r.tail))
    # the string-level unit joins the slot back: one triple with both of its object's slots
    assert ("张智尧", "饰演", (("@value", "楚留香"), ("inWork", "楚留香新传"))) in string_triples(record, record.relations)


def test_a_mention_missing_from_its_text_names_the_line_and_the_mention(tmp_path):
    bad = {**DUIE_LINE, "spo_list": [{**DUIE_LINE["spo_list"][0], "object": {"@value": "李四"}}]}
    path = write_lines(tmp_path / "duie.json", [DUIE_LINE, bad])
    with pytest.raises(DataError, match=r"duie.json:2: triple 1: '李四' does not occur in the text"):
        read_records(path)
    assert len(read_records(path, on_error="skip")) == 1


def test_both_token_offset_shapes_read_the_same_relations(tmp_path):
    tokens = ["John", "Smith", "works", "for", "Acme", "Corp", "in", "Boston", "."]
    spert = {"tokens": tokens, "entities": [{"type": "Peop", "start": 0, "end": 2}, {"type": "Org", "start": 4, "end": 6},
                                            {"type": "Loc", "start": 7, "end": 8}],
             "relations": [{"type": "Work_For", "head": 0, "tail": 1}, {"type": "OrgBased_In", "head": 1, "tail": 2}]}
    lists = {"tokens": tokens, "entities": [[0, 2, "Peop"], [4, 6, "Org"], [7, 8, "Loc"]],
             "relations": [[0, 2, 4, 6, "Work_For"], [4, 6, 7, 8, "OrgBased_In"]]}
    a, = read_records(write_lines(tmp_path / "spert.json", [spert]))
    b, = read_records(write_lines(tmp_path / "lists.json", [lists]))
    assert a.text == "John Smith works for Acme Corp in Boston ."
    assert triples(a) == triples(b) == [("Acme Corp", "Org", "OrgBased_In", "Boston", "Loc"),
                                        ("John Smith", "Peop", "Work_For", "Acme Corp", "Org")]
    with pytest.raises(DataError, match=r"lists.json:1: relation 0: tokens \[0, 3\) are none of the record's entities"):
        read_records(write_lines(tmp_path / "lists.json", [{**lists, "relations": [[0, 3, 4, 6, "Work_For"]]}]))


def test_the_public_relation_sets_read_as_their_readme_counts_them():
    from conftest import SHARED_DATA

    root = os.path.join(SHARED_DATA, "relations")
    if not os.path.isdir(root):
        pytest.skip(f"no relation sets in {root}")
    counts = {name: sum(len(r.relations) for r in read_records(os.path.join(root, name)))
              for name in ("conll04/test.json", "scierc/dev.json")}
    assert counts == {"conll04/test.json": 422, "scierc/dev.json": 455}
    path = os.path.join(root, "duie2-subset/dev.json")
    dev = read_records(path)
    # the README's 3,656 triples, one listed twice in its line read once; each extra slot of a complex
    # object a relation of its own
    with open(path, encoding="utf-8") as lines:
        raw = [json.loads(line)["spo_list"] for line in lines]
    assert sum(map(len, raw)) == 3656
    distinct = sum(len({(s["subject"], s["predicate"], s["object"]["@value"]) for s in spo}) for spo in raw)
    slots = sum(len({(s["subject"], s["predicate"], k, v) for s in spo for k, v in s["object"].items() if k != "@value"})
                for spo in raw)
    assert len(dev) == 2000 and sum(len(r.relations) for r in dev) == distinct + slots == 3655 + 109


def test_triple_lists_and_annotation_tools_relations_are_read(tmp_path):
    record, = read_records(write_lines(tmp_path / "t.json", [
        {"text": "Alice founded Acme in Paris.", "triple_list": [["Alice", "founder_of", "Acme"]]}]))
    assert triples(record) == [("Alice", "ENTITY", "founder_of", "Acme", "ENTITY")]
    doccano = {"id": 1, "text": "Alice founded Acme.", "entities": [
        {"id": 7, "label": "PER", "start_offset": 0, "end_offset": 5}, {"id": 8, "label": "ORG", "start_offset": 14,
                                                                          "end_offset": 18}],
        "relations": [{"id": 3, "from_id": 7, "to_id": 8, "type": "founded"}]}
    record, = read_records(write_lines(tmp_path / "d.jsonl", [doccano]))
    assert triples(record) == [("Alice", "PER", "founded", "Acme", "ORG")]
    task = {"id": 5, "data": {"text": "Alice founded Acme."}, "annotations": [{"result": [
        {"id": "a", "type": "labels", "from_name": "label", "to_name": "text",
         "value": {"start": 0, "end": 5, "text": "Alice", "labels": ["PER"]}},
        {"id": "b", "type": "labels", "from_name": "label", "to_name": "text",
         "value": {"start": 14, "end": 18, "text": "Acme", "labels": ["ORG"]}},
        {"type": "relation", "from_id": "b", "to_id": "a", "direction": "left", "labels": ["founded"]}]}]}
    (tmp_path / "ls.json").write_text(json.dumps([task]), encoding="utf-8")
    record, = read_records(str(tmp_path / "ls.json"))
    assert triples(record) == [("Alice", "PER", "founded", "Acme", "ORG")]  # "left": from the to_id region


def test_the_project_jsonl_writes_and_reads_relations_back(tmp_path):
    record, = read_records(write_lines(tmp_path / "duie.json", [DUIE_LINE]))
    write_jsonl_records([record], str(tmp_path / "out.jsonl"))
    again, = read_records(str(tmp_path / "out.jsonl"))
    assert (again.text, again.entities, again.relations) == (record.text, record.entities, record.relations)
    with pytest.raises(DataError, match=r"relation 0: tail 9 is no index into the line's 2 entities"):
        read_records(write_lines(tmp_path / "bad.jsonl", [{"text": "ab cd", "entities": [
            {"start": 0, "end": 2, "type": "X"}, {"start": 3, "end": 5, "type": "X"}],
            "relations": [{"type": "r", "head": 0, "tail": 9}]}]))


ALICE = {"text": "Alice founded Acme.", "entities": [{"start": 0, "end": 5, "type": "PER"},
                                                    {"start": 14, "end": 18, "type": "ORG"}]}


def _doccano(entities, relations):
    return {"id": 1, "text": "张三去了北京", "entities": entities, "relations": relations}


@pytest.mark.parametrize("line, message", [
    ({**ALICE, "relations": [{"type": "founded", "head": 0, "tail": 0}]},
     r"jsonl:1: relation 'founded' from 'Alice' \[0, 5\) to itself: a relation links two different entities"),
    ({"tokens": ["Alice", "left"], "entities": [[0, 1, "PER"]], "relations": [[0, 1, 0, 1, "self"]]},
     r"relation 'self' from 'Alice' \[0, 5\) to itself"),
    ({"text": "Alice met Alice", "triple_list": [["Alice", "met", "Alice"]]}, r"relation 'met' from 'Alice' .* to itself"),
    ({**ALICE, "relations": [{"type": "founded@", "head": 0, "tail": 1}]},
     r"relation type 'founded@': '@' marks a complex object's slot, as PREDICATE@SLOT"),
    ({**ALICE, "relations": [{"type": "@in", "head": 0, "tail": 1}]}, r"relation type '@in'"),
    ({"tokens": ["Paris", "is", "big"], "entities": [[0, 1, "LOC"], [0, 1, "ORG"], [2, 3, "X"]],
      "relations": [[0, 1, 2, 3, "is"]]}, r"tokens \[0, 1\) are 2 entities \(LOC, ORG\): write the relation as"),
    (_doccano([{"id": 1, "label": "PER", "start_offset": 0, "end_offset": 2},
               {"id": 1, "label": "LOC", "start_offset": 4, "end_offset": 6}],
              [{"id": 3, "from_id": 1, "to_id": 1, "type": "去"}]),
     r"two entities have the id 1: '张三' \[0, 2\) and '北京' \[4, 6\); give each its own id"),
])
def test_every_reader_refuses_what_is_no_relation_in_one_line(tmp_path, line, message):
    """One definition of a relation in every format: two different entities, a type with '@' only as
    PREDICATE@SLOT, ids and token spans that name one entity each."""
    with pytest.raises(DataError, match=message):
        read_records(write_lines(tmp_path / "f.jsonl", [line]))


def test_label_studio_regions_with_one_id_and_directions_not_its_own_are_refused(tmp_path):
    def task(regions, direction="right"):
        result = [{"id": rid, "type": "labels", "from_name": "label", "to_name": "text",
                   "value": {"start": start, "end": end, "text": "张三去了北京"[start:end], "labels": [kind]}}
                  for rid, start, end, kind in regions]
        result.append({"type": "relation", "from_id": "a", "to_id": "b", "direction": direction, "labels": ["去"]})
        return [{"id": 1, "data": {"text": "张三去了北京"}, "annotations": [{"id": 1, "result": result}]}]

    path = tmp_path / "ls.json"
    path.write_text(json.dumps(task([("a", 0, 2, "PER"), ("b", 4, 6, "LOC"), ("b", 0, 2, "PER")])), encoding="utf-8")
    with pytest.raises(DataError, match=r"two regions have the id 'b': '北京' \[4, 6\) and '张三' \[0, 2\)"):
        read_records(str(path))
    path.write_text(json.dumps(task([("a", 0, 2, "PER"), ("b", 4, 6, "LOC")], "sideways")), encoding="utf-8")
    with pytest.raises(DataError, match=r"has direction 'sideways'; Label Studio's are right, left, bi"):
        read_records(str(path))
    # a region labelled by two controls (one id, one span) is one region with both labels
    path.write_text(json.dumps(task([("a", 0, 2, "PER"), ("b", 4, 6, "LOC"), ("b", 4, 6, "GPE")])), encoding="utf-8")
    record, = read_records(str(path))
    assert triples(record) == [("张三", "PER", "去", "北京", "GPE"), ("张三", "PER", "去", "北京", "LOC")]


def test_two_entities_on_the_same_span_keep_their_own_relations(tmp_path):
    line = {"tokens": ["Paris", "hosts", "Expo"], "entities": [{"type": "LOC", "start": 0, "end": 1},
                                                              {"type": "ORG", "start": 0, "end": 1},
                                                              {"type": "EVT", "start": 2, "end": 3}],
            "relations": [{"type": "hosts", "head": 0, "tail": 2}, {"type": "funds", "head": 1, "tail": 2}]}
    record, = read_records(write_lines(tmp_path / "spert.json", [line]))
    assert triples(record) == [("Paris", "LOC", "hosts", "Expo", "EVT"), ("Paris", "ORG", "funds", "Expo", "EVT")]


def test_a_slot_without_its_triple_counts_in_the_duie_score_instead_of_vanishing():
    text = "张智尧在楚留香新传里"
    head, work = Entity(0, 3, "人物"), Entity(4, 9, "作品")
    record = Record(text, [head, work], relations=(Relation(head, "饰演@inWork", work),))
    assert string_triples(record, record.relations) == {("张智尧", "饰演", (("inWork", "楚留香新传"),))}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.integers(3, 9))
def test_relation_decoding_is_the_plain_formula(seed, relations, length):
    rng = np.random.default_rng(seed)
    spans = sorted({TokenSpan(int(rng.integers(2)), int(s), int(s + rng.integers(0, length - s)))
                    for s in rng.integers(0, length, 5)})
    starts, ends = rng.normal(size=(2, relations, length, length))
    cells = [PairCell(part * relations + r, i, j, 0.5) for part, planes in enumerate([starts, ends])
             for r, i, j in zip(*np.nonzero(planes > 0))]
    found = sorted((r.type, r.head, r.tail) for r in relation_pairs(spans, cells, relations))
    assert found == sorted(reference.decode_relations(spans, starts, ends))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.integers(3, 7))
def test_relation_decoding_over_every_span_is_the_plain_formula(seed, relations, length):
    """Every cell a span (an untrained model's decoding): the join over start and end cells, not over
    the spans, answers, and answers the same."""
    rng = np.random.default_rng(seed)
    spans = [TokenSpan(kind, s, e) for kind in range(2) for s in range(length) for e in range(s, length)]
    starts, ends = rng.normal(size=(2, relations, length, length)) + 1.5
    cells = [PairCell(part * relations + r, i, j, 0.5) for part, planes in enumerate([starts, ends])
             for r, i, j in zip(*np.nonzero(planes > 0))]
    found = sorted((r.type, r.head, r.tail) for r in relation_pairs(spans, cells, relations))
    assert found == sorted(reference.decode_relations(spans, starts, ends))


def test_pair_cells_keep_the_best_of_each_plane_and_text_within_the_bound():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 1 + 2 * 2, 8, 8)).astype("float32")  # one entity type, two relations
    span_text = np.array([[0, 1, 1, 1, 2, 2, 2, 0], [0, 1, 1, 1, 1, 1, 0, 0]])
    every, none_cut = pair_cells(logits, span_text, 1, -10.0)
    bounded, cut = pair_cells(logits, span_text, 1, -10.0, limit=3)
    assert none_cut == 0 and cut == sum(map(len, every)) - sum(map(len, bounded))
    for row, (all_cells, kept) in enumerate(zip(every, bounded)):
        groups = {}
        for cell in all_cells:
            groups.setdefault((cell.plane, span_text[row, cell.row]), []).append(cell)
        expected = sorted(c for group in groups.values() for c in sorted(group, key=lambda c: -c.score)[:3])
        assert sorted(kept) == expected
    assert all(span_text[row, c.row] == span_text[row, c.column] > 0 for row, kept in enumerate(bounded) for c in kept)


def test_pair_cells_split_by_window_as_spans_do():
    cells = [PairCell(0, 1, 3, 0.9), PairCell(1, 6, 7, 0.8)]
    assert split_row(cells, [5, 4], ("row", "column")) == [[PairCell(0, 1, 3, 0.9)], [PairCell(1, 1, 2, 0.8)]]


def test_the_relation_loss_is_the_three_heads_mean_losses_summed():
    from globalpointer.model.heads import EfficientGlobalPointer, GlobalPointer
    from globalpointer.model.relation_head import build_relation_head

    paddle.seed(3)
    types, relations, length, hidden = 2, 3, 6, 8
    head = build_relation_head(GlobalPointer(hidden, types, head_size=4), EfficientGlobalPointer, hidden, relations, 4)
    x = paddle.randn([2, length, hidden])
    span_text = paddle.to_tensor([[0, 1, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0]])
    logits = head(x, span_text)
    assert logits.shape == [2, types + 2 * relations, length, length]
    gold = paddle.to_tensor([[[0, 1, 2], [1, 3, 3]], [[1, 1, 1], [-1, -1, -1]]])
    pairs = paddle.to_tensor([[[0, 1, 3], [3, 2, 3]], [[2, 3, 1], [-1, -1, -1]]])  # start plane 0, end plane 3...
    value, dropped = head.loss(logits, gold, span_text, pairs=pairs)
    scores, text = logits.numpy().astype("float64"), span_text.numpy() > 0
    labels = np.zeros(scores.shape)
    for b, rows in enumerate(gold.numpy()):
        for kind, i, j in rows:
            if kind >= 0:
                labels[b, kind, i, j] = 1
    for b, rows in enumerate(pairs.numpy()):
        for plane, i, j in rows:
            if plane >= 0:
                labels[b, types + plane, i, j] = 1
    entity = reference.multilabel_cross_entropy(scores[:, :types], labels[:, :types], reference.open_cells(text))
    cells = reference.open_cells(text, tril_mask=False)
    starts = reference.multilabel_cross_entropy(scores[:, types:types + relations], labels[:, types:types + relations], cells)
    ends = reference.multilabel_cross_entropy(scores[:, types + relations:], labels[:, types + relations:], cells)
    assert float(value) == pytest.approx(entity + starts + ends, rel=1e-5)
    assert dropped == 0


def test_an_entity_only_entry_teaches_its_entities_and_no_pair_plane():
    """Beside a relation file, a file without relations declares no relation types: its rows leave the
    pair planes' loss, which is then the relation rows' alone, and keep the entity planes'."""
    from globalpointer.model.heads import EfficientGlobalPointer, GlobalPointer
    from globalpointer.model.relation_head import build_relation_head
    from globalpointer.training.checks import relation_rows

    head_entity, tail_entity = Entity(0, 1, "A"), Entity(2, 3, "A")
    records = [Record("a b", [head_entity], origin="ner.json"),
               Record("a b", [head_entity, tail_entity], origin="re.json", relations=(Relation(head_entity, "r", tail_entity),)),
               Record("c d", [], origin="re.json")]
    assert relation_rows(records, ["r"]).tolist() == [0.0, 1.0, 1.0]
    assert relation_rows([r._replace(origin="") for r in records[1:]], ["r"]) is None and relation_rows(records, []) is None
    paddle.seed(5)
    head = build_relation_head(GlobalPointer(8, 1, head_size=4), EfficientGlobalPointer, 8, 1, 4)
    x = paddle.randn([2, 5, 8])
    span_text = paddle.to_tensor([[0, 1, 1, 1, 0], [0, 1, 1, 1, 0]])
    logits = head(x, span_text)
    gold = paddle.to_tensor([[[0, 1, 1]], [[0, 1, 1]]])
    pairs = paddle.to_tensor([[[-1, -1, -1], [-1, -1, -1]], [[0, 1, 3], [1, 1, 3]]])
    masked, _ = head.loss(logits, gold, span_text, pairs=pairs, pair_planes=paddle.to_tensor([[0.0, 0.0], [1.0, 1.0]]))
    scores, text = logits.numpy().astype("float64"), span_text.numpy() > 0
    labels = np.zeros(scores.shape)
    labels[:, 0, 1, 1] = 1
    labels[1, 1, 1, 3] = labels[1, 2, 1, 3] = 1
    entity = reference.multilabel_cross_entropy(scores[:, :1], labels[:, :1], reference.open_cells(text))
    cells = reference.open_cells(text, tril_mask=False)
    pair = sum(reference.multilabel_cross_entropy(scores[1:, p:p + 1], labels[1:, p:p + 1], cells[1:]) for p in (1, 2)) / 2
    assert float(masked) == pytest.approx(entity + 2 * pair, rel=1e-5)


@pytest.mark.parametrize("rope", [False, True])
def test_the_pair_planes_are_efficient_global_pointers_with_the_span_heads_rope(rope):
    from globalpointer.model.heads import build_head

    paddle.seed(5)
    types, relations, length, hidden = 2, 3, 7, 8
    head = build_head("global_pointer", hidden, types, head_size=4, rope=rope, relations=relations)
    x = paddle.randn([2, length, hidden])
    span_text = paddle.to_tensor([[0, 1, 1, 1, 1, 1, 0], [0, 1, 1, 1, 0, 0, 0]])
    logits = head(x, span_text).numpy()
    for offset, pair_head in ((types, head.starts), (types + relations, head.ends)):
        expected = reference.efficient_global_pointer_scores(
            x.numpy(), pair_head.dense.weight.numpy(), pair_head.dense.bias.numpy(), pair_head.bias_dense.weight.numpy(),
            pair_head.bias_dense.bias.numpy(), relations, 4, use_rope=rope, span_text=span_text.numpy() > 0,
            tril_mask=False)  # a head may follow its tail: both orders scored
        np.testing.assert_allclose(logits[:, offset:offset + relations], expected, rtol=1e-4, atol=1e-4)


def test_strict_and_string_triples_and_the_error_kinds():
    text = "Alice met Bob at Acme in Paris"
    alice, bob, acme, paris = (Entity(0, 5, "PER"), Entity(10, 13, "PER"), Entity(17, 21, "ORG"), Entity(25, 30, "LOC"))
    gold = Record(text, [alice, bob, acme, paris], relations=(
        Relation(alice, "knows", bob), Relation(acme, "based_in", paris), Relation(bob, "works_for", acme),
        Relation(alice, "works_for", acme)))
    found = Record(text, [alice, bob, acme, paris, Entity(17, 20, "ORG")], relations=(
        Relation(alice, "knows", bob),  # correct
        Relation(paris, "based_in", acme),  # reversed
        Relation(bob, "knows", acme),  # wrong relation for (bob, works_for, acme)
        Relation(alice, "works_for", Entity(17, 20, "ORG")),  # a boundary off
        Relation(paris, "knows", alice)))  # spurious
    report = relation_report([gold], [found], ["knows", "based_in", "works_for"])
    assert report["micro"]["correct"] == 1 and report["micro"]["predicted"] == 5 and report["micro"]["support"] == 4
    assert report["errors"] == {"reversed": 1, "wrong_relation": 1, "wrong_boundary": 1, "spurious": 1, "missed": 0}
    assert report["per_type"]["knows"]["precision"] == pytest.approx(1 / 3)  # 3 predicted, 1 right
    assert report["string"]["correct"] == 1  # the string unit compares texts: "Acm" is not "Acme"
    assert judge_relations(gold.relations, ())["missed"] == 4


def test_the_relation_report_counts_the_gold_triples_whose_two_entities_were_found():
    from globalpointer.evaluation.relations import format_relation_report

    text = "Alice works at Acme in Paris"
    alice, acme, paris = Entity(0, 5, "PER"), Entity(15, 19, "ORG"), Entity(23, 28, "LOC")
    gold = Record(text, [alice, acme, paris], relations=(Relation(alice, "works_for", acme),
                                                         Relation(acme, "based_in", paris)))
    # both of works_for's entities found, no pair; based_in's tail found with another type
    found = Record(text, [alice, acme, Entity(23, 28, "PER")])
    report = relation_report([gold], [found], ["works_for", "based_in"])
    assert report["entities_found"] == 1 and report["micro"]["support"] == 2
    assert ("gold triples with both entities found: 1 of 2 (50.00%), the recall the pair cells could reach"
            in format_relation_report(report))
    assert relation_report([gold], [gold])["entities_found"] == 2
    assert "found: 0 of 0, the" in format_relation_report(relation_report([Record(text, [])], [Record(text, [])]))


def test_entity_only_heads_are_built_as_before():
    from globalpointer.model.heads import GlobalPointer, build_head

    assert type(build_head("global_pointer", 8, 3, head_size=4)) is GlobalPointer
    assert isinstance(build_head("global_pointer", 8, 3, head_size=4, relations=2), RelationHead)


# ---- a relation model, trained on a small learnable task, through every command that reads it ----

@pytest.mark.slow  # a trained model and the commands' processes
def test_a_relation_model_trains_and_predict_evaluate_and_load_give_its_triples(relation_run, tmp_path):
    import globalpointer

    best = relation_run / "run" / "best"
    assert json.loads((best / "relations.json").read_text(encoding="utf-8")) == ["出生地", "就职"]
    summary = json.loads((relation_run / "run" / "summary.json").read_text(encoding="utf-8"))
    assert summary["best_dev_f1"] > 0.8  # the strict triple F1 of the dev file, what the run chose by
    report = json.loads((relation_run / "run" / "dev_report.json").read_text(encoding="utf-8"))
    assert report["relations"]["micro"]["f1"] == pytest.approx(summary["best_dev_f1"])
    test = json.loads((relation_run / "run" / "test_report.json").read_text(encoding="utf-8"))
    assert summary["test"] == test["relations"]["micro"] and test["micro"] != test["relations"]["micro"]
    # the two minimum scores fitted on the dev file by its triples (train.calibrate), used by every reader
    fitted = json.loads((best / "thresholds.json").read_text(encoding="utf-8"))
    assert fitted["kind"] == "relations" and 0 < fitted["pair_min_score"] < 1
    assert summary["thresholds"]["dev_f1_after"] >= summary["thresholds"]["dev_f1_before"] == summary["best_dev_f1"]
    assert globalpointer.load(str(best)).extractor.pair_threshold == pytest.approx(
        math.log(fitted["pair_min_score"] / (1 - fitted["pair_min_score"])))

    ner = globalpointer.load(str(best))
    out = ner("李四出生于广州")
    assert [e["text"] for e in out["entities"]] == ["李四", "广州"]
    assert [(r["type"], out["entities"][r["head"]]["text"], out["entities"][r["tail"]]["text"]) for r in
            out["relations"]] == [("出生地", "李四", "广州")]
    assert 0.5 < out["relations"][0]["score"] <= 1

    texts = tmp_path / "texts.txt"
    texts.write_text("李四出生于广州\n王五任职于百度\n", encoding="utf-8")
    subprocess.run([sys.executable, os.path.join(ROOT, "predict.py"), "--model", str(best), "--input", str(texts),
                    "--output", str(tmp_path / "out.jsonl")], check=True, capture_output=True)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {"text": "李四出生于广州", **out}
    assert [r["type"] for r in lines[1]["relations"]] == ["就职"]
    subprocess.run([sys.executable, os.path.join(ROOT, "predict.py"), "--model", str(best), "--input", str(texts),
                    "--output", str(tmp_path / "tasks.json"), "--output-format", "label-studio"], check=True,
                   capture_output=True)
    task = json.loads((tmp_path / "tasks.json").read_text(encoding="utf-8"))[0]
    links = [r for r in task["predictions"][0]["result"] if r["type"] == "relation"]
    assert [(r["labels"], r["from_id"], r["to_id"]) for r in links] == [(["出生地"], "gp0", "gp1")]
    assert "relations" not in task["data"]
    # what predict writes is training data again: the project's JSON lines read its relations back
    again = read_records(str(tmp_path / "out.jsonl"))
    assert [triples(r) for r in again] == [[("李四", "人物", "出生地", "广州", "地点")],
                                           [("王五", "人物", "就职", "百度", "企业")]]

    result = subprocess.run([sys.executable, os.path.join(ROOT, "evaluate.py"), "--model", str(best), "--data",
                             str(relation_run / "dev.json"), "--output", str(tmp_path / "report.json"), "--html",
                             str(tmp_path / "page.html")], capture_output=True, text=True, check=True)
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "<h2>Relations</h2>" in page and "<th>出生地</th>" in page and "micro (string, DuIE)" in page
    assert "micro (strict)" in result.stdout and "micro (string, DuIE)" in result.stdout
    written = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    # how far the triples' and the entities' scores are from how often they are right: every predicted one counted
    assert written["relations"]["calibration"]["items"] == written["relations"]["micro"]["predicted"] > 0
    assert written["calibration"]["items"] == written["micro"]["predicted"] > 0
    assert "calibration of the triples' scores: ECE" in result.stdout and "Calibration of the triples'" in page
    # the saved model decodes with its fitted scores: the dev F1 training reported after fitting them
    assert written["relations"]["micro"]["f1"] == pytest.approx(summary["thresholds"]["dev_f1_after"])
    first = json.loads((tmp_path / "report.predictions.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert "relations" in first and "relations" in first["gold"]


@pytest.mark.slow  # a trained model and the commands' processes
def test_the_service_answers_a_relation_model_as_predict_does(relation_run):
    from fastapi.testclient import TestClient

    import globalpointer
    from globalpointer.deploy import serve

    ner = globalpointer.load(str(relation_run / "run" / "best"))
    texts = ["李四出生于广州", "王五任职于百度"]
    with TestClient(serve.create_app(ner, ner.config.serve)) as client:
        answer = client.post("/v1/extract", json={"texts": texts})
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"] == [{"text": text, **ner(text)} for text in texts]
        assert answer.json()["results"][0]["relations"][0]["type"] == "出生地"
        assert client.get("/v1/labels").json() == {"labels": ner.labels, "relations": ["出生地", "就职"]}
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        assert "relations" in schema["Result"]["properties"]


@pytest.mark.slow  # a trained model and the commands' processes
def test_an_export_of_a_relation_model_gives_its_triples_on_every_backend(relation_run, tmp_path):
    import globalpointer
    from globalpointer.cli import main

    best, export = relation_run / "run" / "best", tmp_path / "export"
    assert main(["export", "--model", str(best), "--output", str(export), "--onnx", "--quantize", "int8",
                 "--verify", str(relation_run / "dev.json")]) == 0
    assert (export / "relations.json").read_bytes() == (best / "relations.json").read_bytes()
    texts = ["李四出生于广州", "王五任职于百度", "张三出生于北京" * 3]
    expected = globalpointer.load(str(best))(texts)
    for backend in ("paddle-inference", "onnxruntime"):
        found = globalpointer.load(str(export), backend=backend)(texts)
        assert [[(r["type"], r["head"], r["tail"]) for r in f["relations"]] for f in found] == \
            [[(r["type"], r["head"], r["tail"]) for r in e["relations"]] for e in expected], backend
        assert [r["score"] for f in found for r in f["relations"]] == pytest.approx(
            [r["score"] for e in expected for r in e["relations"]], abs=1e-4)
    int8 = globalpointer.load(str(export), ["inference.precision=int8"])(texts)
    assert [r["type"] for f in int8 for r in f["relations"]] == [r["type"] for e in expected for r in e["relations"]]
    info = json.loads((export / "export.json").read_text(encoding="utf-8"))
    verified = info["int8"]["onnxruntime"]["verified"]  # on the dev file's strict triples, against float32's
    summary = json.loads((relation_run / "run" / "summary.json").read_text(encoding="utf-8"))
    assert verified["float32"]["f1"] == pytest.approx(100 * summary["thresholds"]["dev_f1_after"], abs=0.01)


@pytest.mark.slow  # a trained model and the commands' processes
def test_the_label_studio_backend_predicts_relations_and_trains_a_round_on_them(relation_run, tmp_path):
    from fastapi.testclient import TestClient

    import globalpointer
    from globalpointer.deploy.label_studio_backend import create_app
    from globalpointer.inference.label_studio import labeling_config
    from test_label_studio_backend import FakeLabelStudio

    best = str(relation_run / "run" / "best")
    ner = globalpointer.load(best)
    interface = labeling_config(ner.labels, ner.relations)
    assert '<Relation value="出生地"/>' in interface
    # the project's annotations: Label Studio's relation results between labelled regions
    tasks = label_studio_tasks(read_records(write_lines(tmp_path / "tasks.json", relation_lines(40, 5))))
    label_studio = FakeLabelStudio(tasks, "secret-token")
    app = create_app(best, ner, str(tmp_path / "rounds"), os.path.join(best, "config.yaml"), label_studio.url,
                     "secret-token")
    try:
        with TestClient(app) as client:
            answer = client.post("/predict", json={"tasks": [{"id": 1, "data": {"text": "李四出生于广州"}}],
                                                   "label_config": interface})
            assert answer.status_code == 200, answer.text
            result = answer.json()["results"][0]["result"]
            assert label_studio_links(result) == [("出生地", "李四", "广州")]
            project = {"id": 7, "label_config": interface}
            assert client.post("/webhook", json={"action": "START_TRAINING", "project": project}).status_code == 201
            assert app.state.trainer.wait_idle(300)
            assert client.get("/health").json()["last_round"]["state"] == "served", app.state.trainer.last
    finally:
        label_studio.shutdown()
    round_model = tmp_path / "rounds" / "round-001" / "run" / "best"
    assert json.loads((round_model / "relations.json").read_text(encoding="utf-8")) == ["出生地", "就职"]


@pytest.mark.slow  # a trained model and the commands' processes
def test_doccano_output_of_a_relation_model_is_its_relation_import_and_reads_back(relation_run, tmp_path):
    (tmp_path / "x.txt").write_text("李四出生于广州\n王五任职于百度\n", encoding="utf-8")
    best = relation_run / "run" / "best"
    for output_format, name in (("jsonl", "out.jsonl"), ("doccano", "doccano.jsonl")):
        subprocess.run([sys.executable, "-m", "globalpointer", "predict", "--model", str(best), "--input",
                        str(tmp_path / "x.txt"), "--output", str(tmp_path / name), "--output-format", output_format,
                        "--certainty"], check=True, capture_output=True, timeout=120)
    ours = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = [json.loads(line) for line in (tmp_path / "doccano.jsonl").read_text(encoding="utf-8").splitlines()]
    assert lines[0]["entities"][0] == {"id": 0, "label": "人物", "start_offset": 0, "end_offset": 2}
    assert lines[0]["relations"] == [{"id": 0, "from_id": 0, "to_id": 1, "type": "出生地"}]
    assert "label" not in lines[0] and [line["certainty"] for line in lines] == [line["certainty"] for line in ours]
    assert all(0 < line["certainty"] <= 1 for line in ours)
    assert [triples(r) for r in read_records(str(tmp_path / "doccano.jsonl"), "doccano")] == \
        [triples(r) for r in read_records(str(tmp_path / "out.jsonl"))]


@pytest.mark.slow  # a trained model and the commands' processes
def test_a_relation_model_starts_another_run_and_resumes(relation_run, tmp_path, capsys):
    from globalpointer.cli import train_main

    config = str(relation_run / "config.yaml")
    best = relation_run / "run" / "best"
    # its heads' RoPE is in the weights' meaning: another value is refused before any work
    assert train_main(["--config", config, "--set", f"train.init_from={best}", "--set", "model.rope=false",
                       "--set", f"output_dir={tmp_path / 'other'}"]) == 2
    assert "was trained with model.rope=true, the config says false" in capsys.readouterr().err
    assert not (tmp_path / "other" / "best").exists()
    assert train_main(["--config", config, "--set", f"train.init_from={best}", "--set", "train.epochs=1",
                       "--set", f"output_dir={tmp_path / 'more'}"]) == 0
    assert (tmp_path / "more" / "best" / "relations.json").read_bytes() == (best / "relations.json").read_bytes()
    summary = json.loads((tmp_path / "more" / "summary.json").read_text(encoding="utf-8"))
    assert summary["best_dev_f1"] > 0.8  # it starts from the trained triples
    # a relation run continues from its last/ checkpoint (each in a process of its own, as users run them:
    # the optimizer state is keyed by the names Paddle gives parameters in their process)
    for epochs, resume in ((2, []), (3, ["--resume", "--resume-anyway"])):
        subprocess.run([sys.executable, os.path.join(ROOT, "train.py"), "--config", config, *resume, "--set",
                        f"train.epochs={epochs}", "--set", f"output_dir={tmp_path / 'run'}"], check=True,
                       capture_output=True)
    assert json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))["epochs_completed"] == 3
    assert (tmp_path / "run" / "last" / "relations.json").read_bytes() == (best / "relations.json").read_bytes()


@pytest.mark.slow  # a trained model and the commands' processes
def test_a_model_of_other_relation_types_is_no_start(relation_run, tmp_path):
    from globalpointer.cli import train_main

    lines = [{**line, "spo_list": [{**spo, "predicate": "住在"} for spo in line["spo_list"]]}
             for line in relation_lines(20, 3)]
    train = write_lines(tmp_path / "other.json", lines)
    code = train_main(["--config", str(relation_run / "config.yaml"), "--set", f"data.train={train}", "--set",
                       f"train.init_from={relation_run / 'run' / 'best'}", "--set", f"output_dir={tmp_path / 'x'}"])
    assert code != 0


@pytest.mark.slow  # a trained model and the commands' processes
@pytest.mark.parametrize("damage", ["removed", "emptied"])
def test_a_relation_model_without_its_relation_types_is_refused_naming_the_file(relation_run, tmp_path, damage):
    import shutil

    import globalpointer
    from globalpointer.errors import CheckpointError

    best = tmp_path / "best"
    shutil.copytree(relation_run / "run" / "best", best)
    if damage == "removed":
        (best / "relations.json").unlink()
    else:
        (best / "relations.json").write_text("", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"relations\.json"):
        globalpointer.load(str(best))


@pytest.mark.slow  # a trained model and the commands' processes
def test_calibrate_fits_a_relation_models_two_minimum_scores_by_triples(relation_run, tmp_path):
    import shutil

    best = tmp_path / "best"
    shutil.copytree(relation_run / "run" / "best", best)
    (best / "thresholds.json").unlink()
    result = subprocess.run([sys.executable, "-m", "globalpointer", "calibrate", "--model", str(best), "--data",
                             str(relation_run / "dev.json")], capture_output=True, text=True, check=True)
    assert "of the pair cells" in result.stdout and "strict triple F1" in result.stdout
    fitted = json.loads((best / "thresholds.json").read_text(encoding="utf-8"))
    assert fitted["kind"] == "relations" and fitted["micro_f1"]["after"] >= fitted["micro_f1"]["before"]


def _entity_only(path, lines):
    """``lines`` (DuIE) as the project's JSON lines with their entities and no relation."""
    from globalpointer.data.readers import read_records

    records = read_records(str(lines))
    path.write_text("".join(json.dumps({"text": r.text, **r.dicts(relations=False)}, ensure_ascii=False) + "\n"
                            for r in records), encoding="utf-8")
    return str(path)


def test_files_that_cannot_measure_a_relation_model_are_said_or_refused(relation_run, tmp_path, caplog, capsys):
    """A relation model's evaluate on a file without relations says so in one line; calibrate on it
    refuses and keeps the fitted thresholds; a gold relation type the model never learned is refused as
    an unknown entity type is."""
    from globalpointer.cli import main as cli

    best = relation_run / "run" / "best"
    no_relations = _entity_only(tmp_path / "entities.jsonl", relation_run / "dev.json")
    with caplog.at_level("WARNING", logger="globalpointer"):
        assert cli(["evaluate", "--model", str(best), "--data", no_relations]) == 0
    assert "entities.jsonl: 40 texts and no relation: the relation model's triples cannot be measured on it" \
        in caplog.text
    fitted = (best / "thresholds.json").read_bytes()
    capsys.readouterr()
    assert cli(["calibrate", "--model", str(best), "--data", no_relations]) == 2
    assert "40 texts and no relation: minimum scores fitted on it by triple F1 would fit nothing; " \
           f"{best / 'thresholds.json'} is left as it is" in capsys.readouterr().err
    assert (best / "thresholds.json").read_bytes() == fitted
    unknown = [json.loads(line) for line in open(relation_run / "dev.json", encoding="utf-8")][:3]
    unknown[2]["spo_list"][0]["predicate"] = "出生"
    assert cli(["evaluate", "--model", str(best), "--data", write_lines(tmp_path / "typo.json", unknown)]) == 2
    assert "typo.json:3: relation type '出生' is not among the model's relation types (出生地, 就职, a near miss of " \
           "'出生地'" in capsys.readouterr().err


def test_a_dev_file_without_relations_chooses_nothing_and_an_entity_file_beside_relations_trains(tmp_path, caplog):
    from globalpointer.cli import train_main
    from synthetic import relation_config

    config = relation_config(tmp_path, train_lines=48, dev_lines=16, train__epochs=1)
    dev = _entity_only(tmp_path / "dev-entities.jsonl", tmp_path / "dev.json")
    extra = _entity_only(tmp_path / "more-entities.jsonl", tmp_path / "dev.json")
    with caplog.at_level("INFO"):
        assert train_main(["--config", config, "--set", f"data.dev={dev}", "--set",
                           f"data.train=[{tmp_path / 'train.json'}, {extra}]"]) == 0
    assert "dev-entities.jsonl: 16 texts and no relation: its strict triple F1 would be 0 at every evaluation; it " \
           "chooses nothing" in caplog.text
    assert "more-entities.jsonl: no relation in the file: its texts teach their entities, not that they hold no " \
           "relation" in caplog.text


def test_patience_counts_from_the_first_dev_f1_above_zero():
    from globalpointer.training.run import Progress

    progress = Progress()
    kept = []
    for step, f1 in enumerate([0.0, 0.0, 0.0, 0.4, 0.3, 0.5], 1):
        progress.global_step = step
        kept.append(progress.record_evaluation(f1))
    # while nothing is learned the latest is kept and patience waits; from 0.4 on it counts
    assert kept == [True, True, True, True, False, True] and progress.best_step == 6
    progress.global_step = 7
    assert not progress.record_evaluation(0.0) and progress.evals_since_best == 1


@pytest.mark.parametrize("entity_f1, relations, said", [
    (0.52, ["r"], "the best dev strict triple F1 is 0.00: the model found the dev file's entities (entity F1 52.00; "
                  "gold triples with both entities found: 3 of 10 (30.00%), the recall the pair cells could reach) "
                  "but none of its triples"),
    (0.0, ["r"], "found none of the dev file's triples or entities. Likely causes: an encoder for another language"),
    (0.0, [], "found none of the dev file's entities. Likely causes: an encoder for another language")])
def test_the_zero_f1_warning_blames_the_encoder_only_when_the_entities_are_missed_too(tmp_path, caplog, entity_f1,
                                                                                      relations, said):
    from types import SimpleNamespace

    from globalpointer.config import load_config
    from globalpointer.training.loop import warn_nothing_learned

    report = {"micro": {"f1": entity_f1}, "relations": {"micro": {"support": 10}, "entities_found": 3}}
    (tmp_path / "dev_report.json").write_text(json.dumps(report), encoding="utf-8")
    state = SimpleNamespace(config=load_config(), run=SimpleNamespace(path=str(tmp_path)), relations=relations,
                            windows=[0] * 24, progress=SimpleNamespace(global_step=6))
    with caplog.at_level("WARNING"):
        warn_nothing_learned(state)
    assert said in caplog.text
    assert ("encoder for another language" in caplog.text) == (entity_f1 == 0)


@pytest.mark.parametrize("relational, texts, small_set, asked, resolved", [
    (True, 24, 300, ("auto", "auto"), (1e-3, 0.3)),
    (True, 300, 300, ("auto", "auto"), (1e-3, 0.3)),
    (True, 301, 300, ("auto", "auto"), (3e-4, 0.1)),
    (True, 24, 0, ("auto", "auto"), (3e-4, 0.1)),  # 0: no file is small
    (False, 24, 300, ("auto", "auto"), (3e-4, 0.1)),  # an entity model: the rule is the relation sets' measurement
    (True, 24, 300, (5e-5, "auto"), (5e-5, 0.3)),  # a value the user gives is kept
    (True, 24, 300, ("auto", 0.0), (1e-3, 0.0))])
def test_the_encoder_rate_and_dropout_auto_are_higher_for_a_relation_model_on_a_small_file(relational, texts, small_set,
                                                                                            asked, resolved):
    from globalpointer.config import load_config
    from globalpointer.training.recipes import resolved_small_set

    lr, dropout = asked
    config = load_config(None, [f"train.lr={lr}", f"model.dropout={dropout}",
                                f"train.small_training_set={small_set}"])
    config = resolved_small_set(config, texts, relational)
    assert (config.train.lr, config.model.dropout) == pytest.approx(resolved)


def test_a_small_relation_file_trains_at_the_higher_rate_and_its_checkpoint_records_it(tmp_path, caplog, monkeypatch):
    import yaml
    from globalpointer.cli import train_main
    from globalpointer.training import step
    from synthetic import relation_config

    rates = []
    monkeypatch.setattr(step, "layer_rates", lambda named, lr, decay, real=step.layer_rates: rates.append(lr) or
                        real(named, lr, decay))
    config = relation_config(tmp_path, train_lines=48, dev_lines=16, train__epochs=1, train__lr=None,
                             model__dropout=None, train__calibrate="none")  # fitting is not what this tests
    with caplog.at_level("INFO"):
        assert train_main(["--config", config]) == 0
    assert "train.lr and model.dropout auto: 0.001 and 0.3, as for a relation model on 48 training texts" in caplog.text
    recorded = yaml.safe_load(open(tmp_path / "run" / "best" / "config.yaml", encoding="utf-8"))
    assert (recorded["train"]["lr"], recorded["model"]["dropout"]) == (0.001, 0.3) and rates == [0.001]
    # --resume resolves auto to the recorded values again: no conflict with the run's config.yaml
    caplog.clear()
    assert train_main(["--config", config, "--resume"]) == 0 and "differs" not in caplog.text
