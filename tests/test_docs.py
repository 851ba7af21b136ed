"""The documentation site: every config key on its configuration page, and a strict build (a broken
link or a missing page fails)."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from globalpointer.config import flatten_config, load_config
from helpers import ROOT


def load_hook():
    spec = importlib.util.spec_from_file_location("config_keys", os.path.join(ROOT, "docs", "hooks", "config_keys.py"))
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def test_the_configuration_page_lists_every_key_with_its_default():
    hook = load_hook()
    page = open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8").read()
    assert hook.MARKER in page
    table = hook.on_page_markdown(page, None, None, None).split("## Every key")[1]
    rows = {line.split("|")[1].strip(" `"): line for line in table.splitlines() if line.startswith("| `")}
    keys = flatten_config(load_config())
    assert set(rows) == set(keys)
    assert "`efficient_global_pointer`" in rows["model.head"] and "`onnxruntime`" in rows["inference.backend"]
    assert "| `64` |" in rows["inference.batch_size"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (requirements.txt installs it)")
def test_the_site_builds_strictly(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    architecture = (tmp_path / "site" / "architecture.html").read_text(encoding="utf-8")
    assert "reference.global_pointer_scores" in architecture
    configuration = (tmp_path / "site" / "configuration.html").read_text(encoding="utf-8")
    assert "inference.batch_size" in configuration
    # from disk, a link opens a page, not a folder listing
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="architecture.html"' in index and 'href="architecture/"' not in index


SCRIPTS = {"train.py": "train", "evaluate.py": "evaluate", "predict.py": "predict"}


def documented_commands():
    """(file, command line) of every `globalpointer ...` / `python train.py ...`-style line in the
    README's and the docs' bash blocks, comments and shell plumbing removed."""
    import glob
    import shlex

    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for page in pages:
        text = open(page, encoding="utf-8").read().replace("\\\n", " ")
        for block in text.split("```bash")[1:]:
            for line in block.split("```")[0].splitlines():
                words = shlex.split(line, comments=True)
                for stop in ("|", ">", "&&"):
                    if stop in words:  # the command this line is about comes after a pipe, before a redirect
                        words = words[words.index(stop) + 1:] if stop == "|" else words[:words.index(stop)]
                script = next((i for i, word in enumerate(words) if word in SCRIPTS), None)
                if script is not None:
                    yield os.path.basename(page), [SCRIPTS[words[script]], *words[script + 1:]]
                elif words[:1] == ["globalpointer"] and len(words) > 1:
                    yield os.path.basename(page), words[1:]


class Parsed(Exception):
    pass


def test_every_documented_command_parses(monkeypatch):
    """The commands the README and the docs show take the flags they are shown with (parsed, not run)."""
    import argparse

    from globalpointer.cli import main

    def parse_only(self, args=None, namespace=None):
        raise Parsed(original(self, args, namespace))
    original = argparse.ArgumentParser.parse_args
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    commands = list(documented_commands())
    assert len(commands) > 20 and {argv[0] for _, argv in commands} >= {"train", "evaluate", "predict", "export",
                                                                         "calibrate", "serve", "convert"}
    for page, argv in commands:
        with pytest.raises(Parsed):
            try:
                main(argv)
            except SystemExit as refused:
                raise AssertionError(f"{page}: {' '.join(argv)} does not parse (exit {refused.code})") from None


def test_every_test_the_docs_name_exists():
    """The reliability tables (and other pages) name the test that holds each case: a test renamed or
    moved must take its name in the docs along."""
    import glob
    import re

    defined = set()
    for path in glob.glob(os.path.join(ROOT, "tests", "*.py")):
        defined |= set(re.findall(r"^(?:async )?def (test_\w+)", open(path, encoding="utf-8").read(), re.M))
    named = set()
    for path in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True) + [os.path.join(ROOT, "README.md")]:
        named |= set(re.findall(r"(?:`|::)(test_\w+)(?![\w.])", open(path, encoding="utf-8").read()))
    files = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "tests", "*.py"))}
    assert sorted(named - defined - {f[:-3] for f in files}) == []


@pytest.mark.parametrize("page", ["index.md", "training.md"])
def test_the_pages_that_list_the_subcommands_list_every_one(page):
    from globalpointer.cli import COMMANDS

    text = open(os.path.join(ROOT, "docs", page), encoding="utf-8").read()
    # `name`, `globalpointer name` or globalpointer a|name|b: as a command, not a word of the prose
    missing = [name for name in COMMANDS if not re.search(rf"[`| ]{re.escape(name)}[`|]", text)]
    assert not missing, f"docs/{page} leaves out {missing}"


def test_config_keys_are_kept_whole_in_the_tables():
    """The theme breaks code anywhere: keys were cut mid-word in the configuration table."""
    import yaml

    site = yaml.safe_load(open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8"))
    assert "stylesheets/extra.css" in site["extra_css"]
    css = open(os.path.join(ROOT, "docs", "stylesheets", "extra.css"), encoding="utf-8").read()
    assert "td:first-child > code:only-child" in css and "white-space: nowrap" in css


def test_the_quickstarts_length_is_stated_the_same_everywhere():
    """One figure for how long the quickstart trains, in each place that states one."""
    pages = {"README.md": "Training takes", "docs/index.md": "stopped by the dev F1",
             "configs/quickstart.yaml": "# Quickstart:", "docs/configuration.md": "| `quickstart.yaml` |"}
    stated = {}
    for page, near in pages.items():
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        at = text.index(near)
        stated[page] = re.search(r"(\d+ to \d+|about \w+|a few) minutes", text[at:at + 300]).group(0)
    assert len(set(stated.values())) == 1, stated


def test_every_shipped_config_has_a_row_in_the_readmes_results():
    """The README's table of results names each config in configs/ once, and no config that is gone."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    table = readme[readme.index("## Results of the shipped configs"):]
    table = table[:table.index("\n## ")]
    rows = re.findall(r"^\| `configs/([\w.-]+\.yaml)`", table, flags=re.MULTILINE)
    shipped = sorted(os.listdir(os.path.join(ROOT, "configs")))
    assert sorted(rows) == shipped
