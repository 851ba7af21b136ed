"""Error kinds, the confusion table, and the HTML page (checked in headless Chromium when it is installed)."""
import html
import json
import os
import re
import subprocess

import pytest

from globalpointer.evaluation.metrics import error_summary, judge_text
from globalpointer.evaluation.report_html import lanes, render_page
from globalpointer.spans import Entity
from helpers import CHROMIUM, HEADLESS

E = Entity


def kinds(gold, predicted):
    return sorted((j.gold, j.entity.start, j.entity.end, j.entity.type, j.kind) for j in judge_text(gold, predicted))


def test_each_error_kind():
    gold = [E(0, 2, "PER"), E(3, 7, "ORG"), E(3, 5, "LOC"), E(10, 12, "PER"), E(20, 22, "LOC")]
    predicted = [E(0, 2, "PER", 0.9),      # correct
                 E(3, 7, "LOC", 0.8),      # wrong type (gold ORG there)
                 E(3, 6, "LOC", 0.7),      # wrong boundary (gold LOC 3..5)
                 E(14, 16, "PER", 0.6)]    # spurious
    assert kinds(gold, predicted) == sorted([
        (False, 0, 2, "PER", "correct"), (False, 3, 7, "LOC", "wrong_type"), (False, 3, 6, "LOC", "wrong_boundary"),
        (False, 14, 16, "PER", "spurious"),
        (True, 0, 2, "PER", "correct"), (True, 3, 7, "ORG", "wrong_type"), (True, 3, 5, "LOC", "wrong_boundary"),
        (True, 10, 12, "PER", "missed"), (True, 20, 22, "LOC", "missed")])


def test_summary_counts_agree_with_precision_and_recall():
    """correct + every wrong prediction = predicted; correct + missed + gold taken by a wrong one = gold."""
    gold = [[E(0, 2, "PER"), E(3, 7, "ORG")], [E(1, 3, "LOC")], []]
    predicted = [[E(0, 2, "PER"), E(3, 7, "LOC")], [E(1, 4, "LOC"), E(5, 6, "PER")], [E(0, 1, "ORG")]]
    summary = error_summary(gold, predicted, ["LOC", "ORG", "PER"])
    counts = summary["counts"]
    assert counts == {"correct": 1, "missed": 0, "spurious": 2, "wrong_type": 1, "wrong_boundary": 1}
    assert counts["correct"] + counts["spurious"] + counts["wrong_type"] + counts["wrong_boundary"] == 5
    assert summary["confusion"]["ORG"] == {"LOC": 1} and summary["confusion"]["PER"] == {"PER": 1}


def test_lanes_stack_overlapping_entities():
    placed = lanes([E(0, 4, "ORG"), E(0, 2, "LOC"), E(2, 3, "X"), E(5, 6, "PER")])
    assert [[(e.start, e.end) for e in lane] for lane in placed] == [[(0, 4), (5, 6)], [(0, 2), (2, 3)]]
    for lane in placed:
        assert all(a.end <= b.start for a, b in zip(lane, lane[1:]))


def test_page_is_self_contained_and_marks_errors():
    texts = ["北京大学的张三", "<b>&", "无"]
    gold = [[E(0, 4, "ORG"), E(0, 2, "LOC"), E(5, 7, "PER")], [E(0, 3, "PER")], []]
    predicted = [[E(0, 4, "ORG", 0.9), E(0, 2, "LOC", 0.8)], [E(0, 3, "LOC", 0.7)], []]
    page = render_page("Evaluation", texts, predicted, ["LOC", "ORG", "PER"], gold,
                       error_summary(gold, predicted, ["LOC", "ORG", "PER"]), "meta")
    assert not re.search(r"(src|href)=\"?https?:", page) and "http" not in page
    assert "&lt;b&gt;</span>" in page and ">&amp;</span>" in page and "<b>&" not in page
    assert page.count('class="text"') == 3 and 'data-kinds="missed"' in page and 'data-kinds="wrong_type"' in page
    assert "<b>2</b> correct" in page and "<b>1</b> missed" in page and "<b>1</b> wrong type" in page


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
@pytest.mark.slow
def test_evaluate_html_in_a_real_browser(trained, tmp_path, capsys):
    from globalpointer.cli import evaluate_main, predict_main

    page = tmp_path / "report.html"
    assert evaluate_main(["--model", str(trained / "run" / "best"), "--data", str(trained / "dev.jsonl"),
                          "--output", str(tmp_path / "report.json"), "--html", str(page)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    counts = report["errors"]["counts"]
    assert counts["correct"] == report["micro"]["correct"]
    assert "errors: missed" in capsys.readouterr().out
    assert report["calibration"]["items"] == report["micro"]["predicted"]
    profile = tmp_path / "profile"
    dom = subprocess.run([CHROMIUM, *HEADLESS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert 'data-rendered="60"' in dom  # the page's script ran over all 60 texts
    assert f"<b>{counts['correct']}</b> correct" in dom and "Calibration of the entities' scores" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *HEADLESS, f"--user-data-dir={profile}", f"--screenshot={shot}",
                    "--window-size=1000,800", page.as_uri()], capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and os.path.getsize(shot) > 10_000

    (tmp_path / "in.txt").write_text("北京大学的张三\n李四\n", encoding="utf-8")
    drawn = tmp_path / "pred.html"
    assert predict_main(["--model", str(trained / "run" / "best"), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out.jsonl"), "--html", str(drawn), "--html-texts", "1"]) == 0
    dom = subprocess.run([CHROMIUM, *HEADLESS, f"--user-data-dir={profile}", "--dump-dom", drawn.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert 'data-rendered="1"' in dom and "the first 1 of 2 lines" in dom and "张三" in dom


def test_no_type_is_drawn_in_the_errors_red():
    import colorsys

    from globalpointer.evaluation.report_html import ERROR_COLOUR, PALETTE

    def hue_and_saturation(colour):
        red, green, blue = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
        hue, _, saturation = colorsys.rgb_to_hls(red, green, blue)
        return hue * 360, saturation

    error_hue, _ = hue_and_saturation(ERROR_COLOUR)
    for colour in PALETTE:
        hue, saturation = hue_and_saturation(colour)
        distance = min(abs(hue - error_hue), 360 - abs(hue - error_hue))
        assert distance > 25 or saturation < 0.2, f"{colour} is a red like the errors' {ERROR_COLOUR}"
    assert len(set(PALETTE)) == len(PALETTE)


def test_a_page_of_predictions_has_no_filter_to_choose():
    page = render_page("Predictions", ["北京大学"], [[E(0, 4, "ORG", 0.9)]], ["ORG"])
    assert "<button" not in page and "ORG" in page


# Run in the page after its own script: labels that overlap, gaps that labels open in the text, and
# what the bars are drawn in.
PROBE = """<script>
const tags=[...document.querySelectorAll('.tag > .l')].map(t=>[t.textContent,t.getBoundingClientRect()]);
const clash=[];
for(let i=0;i<tags.length;i++)for(let j=i+1;j<tags.length;j++){const a=tags[i][1],b=tags[j][1];
 if(a.left<b.right-0.5&&b.left<a.right-0.5&&a.top<b.bottom-0.5&&b.top<a.bottom-0.5)clash.push(tags[i][0]+'|'+tags[j][0]);}
const gaps=[];
document.querySelectorAll('.text').forEach(t=>{const pieces=[...t.querySelectorAll('.seg>.t,.plain')];
 const ink=p=>{const r=document.createRange();r.selectNodeContents(p);return r.getBoundingClientRect();};
 for(let i=1;i<pieces.length;i++){const a=ink(pieces[i-1]),b=ink(pieces[i]);
  if(Math.abs(a.top-b.top)<1&&b.left-a.right>0.5)gaps.push(pieces[i-1].textContent+'|'+pieces[i].textContent);}});
document.body.dataset.clashes=JSON.stringify(clash);document.body.dataset.tags=JSON.stringify(tags.map(t=>t[0]));
document.body.dataset.gaps=JSON.stringify(gaps);
document.body.dataset.missed=JSON.stringify([...document.querySelectorAll('.bar.missed')].map(b=>getComputedStyle(b).backgroundColor));
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)")
@pytest.mark.slow
def test_labels_never_overlap_nor_push_the_text_apart_and_misses_keep_their_types_colour(tmp_path):
    """What users saw on CLUENER: labels of adjacent and nested spans ran into each other
    ("positionname", "compaposition ✗"); then labels wider than their entity pushed the text apart
    (`曼联      之后`); and every missed bar was red whatever its type."""
    from globalpointer.evaluation.report_html import colours

    labels = ["company", "name", "organization", "position"]
    texts = ["经理张三在腾讯", "腾讯总经理", "曼联之后对阵AC米兰的比赛 in Manchester United"]
    gold = [[E(0, 2, "position"), E(2, 4, "name"), E(5, 7, "company")], [E(0, 2, "company"), E(0, 5, "position")],
            [E(0, 2, "organization"), E(6, 10, "organization"), E(17, 34, "organization")]]
    predicted = [[E(0, 2, "position", 0.9), E(2, 4, "position", 0.8)], [E(0, 2, "company", 0.7)],
                 [E(0, 2, "organization", 0.9), E(4, 6, "name", 0.6), E(6, 10, "company", 0.8),
                  E(17, 27, "organization", 0.7)]]
    page = render_page("Evaluation", texts, predicted, labels, gold, error_summary(gold, predicted, labels))
    path = tmp_path / "page.html"
    path.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = subprocess.run([CHROMIUM, *HEADLESS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    found = {key: json.loads(html.unescape(value)) for key, value in re.findall(r'data-(\w+)="([^"]*)"', dom)
             if key in ("clashes", "tags", "missed", "gaps")}
    assert found["gaps"] == []
    assert found["clashes"] == [] and len(found["tags"]) >= 8
    assert "position (gold name) ✗" in found["tags"]  # a wrong type names the gold type on the page itself
    palette = colours(labels)

    def rgb(colour):
        return "rgb({}, {}, {})".format(*(int(colour[i:i + 2], 16) for i in (1, 3, 5)))

    # bars of the missed company, and of the missed position (drawn in two segments)
    assert sorted(found["missed"]) == sorted([rgb(palette["company"])] + [rgb(palette["position"])] * 2)
