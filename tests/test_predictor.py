import io
import json

import pytest

from globalpointer.errors import DataError
from globalpointer.inference.file_prediction import PredictionWriter, parse_line, predict_stream, sniff_format
from helpers import FakeExtractor


def run(data: bytes, fmt="auto", chunk=2):
    sink = io.StringIO()
    lines, failed = predict_stream(FakeExtractor(), io.BytesIO(data), PredictionWriter(sink), fmt, chunk)
    return [json.loads(line) for line in sink.getvalue().splitlines()], lines, failed


def test_one_output_line_per_input_line_in_order():
    data = "Paris 巴黎 Paris\n\n  \nno entity\r\nlast Paris".encode()
    out, lines, failed = run(data, "text")
    assert lines == 5 and failed == 0 and len(out) == 5
    assert [o["text"] for o in out] == ["Paris 巴黎 Paris", "", "  ", "no entity", "last Paris"]
    first = out[0]["entities"]
    assert [(e["start"], e["end"], e["text"], e["score"]) for e in first] == [(0, 5, "Paris", 0.875), (9, 14, "Paris", 0.875)]
    for o in out:
        for e in o["entities"]:
            assert o["text"][e["start"]:e["end"]] == e["text"]
    assert out[1]["entities"] == [] and out[2]["entities"] == []


def test_bad_lines_get_an_error_field_and_the_run_goes_on():
    data = '{"text": "Paris", "id": 7}\n{"text": 3}\n{broken\n{"text": "巴黎"}\n'.encode()
    data += b'\xff\xfe bad bytes\n{"text": "ok Paris"}\n'
    out, lines, failed = run(data)
    assert lines == 6 and failed == 3 and len(out) == 6
    assert out[0] == {"text": "Paris", "id": 7, "entities": [{"start": 0, "end": 5, "type": "LOC", "text": "Paris", "score": 0.875}]}
    assert "text" in out[1]["error"] and "malformed JSON" in out[2]["error"] and "UTF-8" in out[4]["error"]
    assert out[5]["entities"][0]["start"] == 3


@pytest.mark.parametrize("encoding", ["gbk", "latin-1"])
def test_a_file_in_another_encoding_is_refused_naming_the_line(encoding):
    """Its first line beyond ASCII is not UTF-8: every text of it would be an error line, written with exit 0."""
    data = ("plain ascii\n" * 3 + "张三在北京\n" if encoding == "gbk" else "plain ascii\n" * 3 + "Zoë à Paris\n")
    with pytest.raises(DataError, match=r"^--input:4: not UTF-8 at byte \d+ of the line: the file must be UTF-8; "
                                         r"convert it \(iconv"):
        run(data.encode(encoding))


def test_format_sniffing():
    assert sniff_format(b'{"text": "a"}\n') == "jsonl"
    assert sniff_format(b'{"a": 1}\n') == "text"
    assert sniff_format("巴黎 {".encode()) == "text"
    assert parse_line(b"a\tb\r\n", "text").text == "a\tb"
