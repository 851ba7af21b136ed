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
