"""MkDocs hook: the table of every config key on configuration.md, made from the schema itself
(``globalpointer.config.key_help``), so the page cannot miss a key or show a stale default; and a
quiet jieba for the search index."""
import logging

MARKER = "<!-- config keys -->"


def key_table() -> str:
    from globalpointer.config import key_help, yaml_scalar

    sections: dict = {}
    for item in key_help():
        section = item.key.split(".")[0] if "." in item.key else "top level"
        sections.setdefault(section, []).append(item)
    parts = []
    for section, items in sections.items():
        parts.append(f"### {section}\n\n| key | default | choices or range | what it does |\n|---|---|---|---|")
        for item in items:
            choices = " ".join(f"`{choice}`" for choice in item.choices) if item.choices else \
                (f"{item.bounds}" if item.bounds else "")
            text = item.help.replace("|", "\\|")
            parts.append(f"| `{item.key}` | `{yaml_scalar(item.default)}` | {choices} | {text} |")
        parts.append("")
    return "\n".join(parts)


def on_page_markdown(markdown, page, config, files):
    return markdown.replace(MARKER, key_table()) if MARKER in markdown else markdown


def on_config(config):
    """The search plugin segments Chinese with jieba, whose import sets its logger to DEBUG: every
    line of its dictionary loading would print twice (its own handler and the root's)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return config
