"""data/convert.py: slices of a file as canonical JSON lines, never over the input."""
import pytest

from globalpointer.cli import main as cli
from synthetic import write_jsonl


def test_convert_onto_its_input_is_refused(tmp_path, capsys):
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": f"张三{i}", "entities": []} for i in range(20)])
    before = open(source, "rb").read()
    assert cli(["convert", source, source, "--take", "10"]) == 2
    assert "is the input" in capsys.readouterr().err and open(source, "rb").read() == before


@pytest.mark.parametrize("flags, message", [(["--take", "-1"], "must be 0 or more"), (["--skip", "-5"], "must be 0 or more")])
def test_convert_refuses_negative_counts(tmp_path, capsys, flags, message):
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "张三", "entities": []}])
    with pytest.raises(SystemExit) as stop:
        cli(["convert", source, str(tmp_path / "out.jsonl"), *flags])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_convert_refuses_a_skip_that_leaves_nothing(tmp_path, capsys):
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "张三", "entities": []}] * 3)
    assert cli(["convert", source, str(tmp_path / "out.jsonl"), "--skip", "999999"]) == 2
    assert "--skip 999999 leaves none of its 3 records" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("output_format", ["doccano", "label-studio"])
def test_a_labelled_file_as_an_annotation_tool_imports_it_reads_back_as_itself(tmp_path, output_format):
    """Relations and nested entities of the DuIE sample, and an entity-only file (doccano's plain
    sequence-labelling lines, no ``relations``)."""
    import json
    import os

    from globalpointer.data.readers import read_records
    from helpers import ROOT, label_studio_result

    def keys(records):
        return [(r.text, sorted(e.key for e in r.entities), sorted(r.key for r in r.relations)) for r in records]

    relational = os.path.join(ROOT, "data", "duie-sample", "dev.json")
    entities_only = write_jsonl(tmp_path / "plain.jsonl", [{"text": "张三在北京", "entities": [
        {"start": 0, "end": 2, "type": "PER"}, {"start": 3, "end": 5, "type": "LOC"}]}, {"text": "无", "entities": []}])
    for source in (relational, entities_only):
        out = str(tmp_path / f"{os.path.basename(source)}.{output_format}")
        assert cli(["convert", source, out, "--output-format", output_format]) == 0
        original = read_records(source)
        assert keys(read_records(out)) == keys(original)
        text = open(out, encoding="utf-8").read()
        if output_format == "doccano":
            first = json.loads(text.splitlines()[0])
            assert ("relations" in first) == (source == relational) and ("label" in first) != (source == relational)
        else:  # done work, not a model's suggestion: annotations, the regions and links a person would draw
            tasks = json.loads(text)
            assert all("predictions" not in task and len(task["annotations"]) == 1 for task in tasks)
            drawn = [[{k: v for k, v in result.items() if k not in ("id", "from_id", "to_id")}
                      for result in label_studio_result(record)] for record in original]
            assert [[{k: v for k, v in result.items() if k not in ("id", "from_id", "to_id")}
                     for result in task["annotations"][0]["result"]] for task in tasks] == drawn


def test_label_studio_tasks_come_with_their_labeling_interface(tmp_path):
    """--label-config writes the interface the tasks need, with the file's entity and relation types, and
    Label Studio's parser of it (the backend's) reads those types back."""
    import os

    from globalpointer.deploy.label_studio_backend.protocol import read_interface
    from helpers import ROOT

    source = os.path.join(ROOT, "data", "duie-sample", "dev.json")
    interface = tmp_path / "interface.xml"
    assert cli(["convert", source, str(tmp_path / "tasks.json"), "--output-format", "label-studio",
                "--label-config", str(interface)]) == 0
    from globalpointer.data.readers import read_records

    records = read_records(source)
    written = interface.read_text(encoding="utf-8")
    assert sorted(read_interface(written).labels) == sorted({e.type for r in records for e in r.entities})
    assert all(f'<Relation value="{r.type}"/>' in written for record in records for r in record.relations)
    assert cli(["convert", source, str(tmp_path / "again.json"), "--label-config", source]) == 2  # never an input
