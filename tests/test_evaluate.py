"""evaluation/evaluate.py: checks before the work."""
from globalpointer.cli import evaluate_main


def test_evaluate_refuses_a_lone_surrogate_before_the_work(trained, tmp_path, capsys):
    data = tmp_path / "dev.jsonl"
    data.write_text('{"text": "张三\\ud800", "entities": []}\n', encoding="utf-8")
    assert evaluate_main(["--model", str(trained / "run" / "best"), "--data", str(data),
                          "--html", str(tmp_path / "page.html")]) == 2
    assert "dev.jsonl:1: the text holds a lone surrogate" in capsys.readouterr().err
    assert not (tmp_path / "page.html").exists()
