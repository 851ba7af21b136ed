"""A small learnable NER task: fixed names in random filler, with nested ORG > LOC spans."""
import json
import random

FILLER = "的一是在不了有和人这中大为上个我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行"
NAMES = {"LOC": ["北京", "上海", "广州", "深圳"], "PER": ["张三", "李四", "王五"], "ORG": ["北京大学", "复旦大学"]}


def make_records(count: int, seed: int, max_filler: int = 12):
    rng = random.Random(seed)
    records = []
    for _ in range(count):
        text, entities = "", []
        for _ in range(rng.randint(1, 3)):
            text += "".join(rng.choice(FILLER) for _ in range(rng.randint(1, max_filler)))
            entity_type = rng.choice(list(NAMES))
            name = rng.choice(NAMES[entity_type])
            entities.append({"start": len(text), "end": len(text) + len(name), "type": entity_type})
            if name == "北京大学":  # nested: the city inside the university
                entities.append({"start": len(text), "end": len(text) + 2, "type": "LOC"})
            text += name
        text += "".join(rng.choice(FILLER) for _ in range(rng.randint(0, 4)))
        records.append({"text": text, "entities": entities})
    return records


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return str(path)


def tiny_config(tmp_path, **overrides) -> str:
    train = write_jsonl(tmp_path / "train.jsonl", make_records(240, 1))
    dev = write_jsonl(tmp_path / "dev.jsonl", make_records(60, 2))
    sections = {
        "data": {"train": train, "dev": dev, "max_length": 24, "window_overlap": 8},
        "model": {"encoder": "tiny", "head_size": 16},
        # every epoch, one rate for the tiny encoder, hard targets, model.min_score: what the tests were
        # written against (a tiny model's fitted threshold sits where many of its scores do)
        "train": {"epochs": 6, "min_steps": 0, "batch_size": 16, "lr": 2e-3, "head_lr": 2e-3, "warmup_ratio": 0.05,
                  "seed": 7,
                  "patience": 0, "layer_lr_decay": 1.0, "boundary_smoothing": 0.0, "calibrate": "none"},
        "device": "cpu",
        "output_dir": str(tmp_path / "run"),
    }
    for key, value in overrides.items():
        section, name = key.split("__") if "__" in key else (None, key)
        (sections[section] if section else sections)[name] = value
    path = tmp_path / "config.yaml"
    import yaml

    path.write_text(yaml.safe_dump(sections, allow_unicode=True), encoding="utf-8")
    return str(path)


def write_lines(path, objects):
    """Objects as JSON lines at ``path`` (a pathlib.Path); its name as a string."""
    path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects), encoding="utf-8")
    return str(path)


PEOPLE, PLACES, FIRMS = ["张三", "李四", "王五"], ["北京", "上海", "广州"], ["华为", "腾讯", "百度"]
FILL = "的一是在了有和这中大为上个以要他时来用们生到作地于出就分对成会可发年动同工也能下过子说产种面而方后多定行"


def relation_lines(count: int, seed: int):
    """DuIE-style lines of a learnable relation task: a person born in a place or working for a firm."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        person, place, firm = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(FIRMS)
        pad = "".join(rng.choice(FILL) for _ in range(rng.randint(0, 5)))
        if rng.random() < 0.5:
            text, spo = f"{pad}{person}出生于{place}", [("出生地", person, "人物", place, "地点")]
        else:
            text, spo = f"{person}任职于{firm}{pad}", [("就职", person, "人物", firm, "企业")]
        lines.append({"text": text, "spo_list": [{"predicate": p, "subject": s, "subject_type": st_,
                                                  "object": {"@value": o}, "object_type": {"@value": ot}}
                                                 for p, s, st_, o, ot in spo]})
    return lines


def relation_config(tmp_path, train_lines: int = 200, dev_lines: int = 40, test_lines: int = 0, **overrides) -> str:
    """The config of a tiny relation model on ``relation_lines`` (train seed 1, dev seed 2, test seed 4),
    written to ``tmp_path``/config.yaml; ``overrides`` as ``tiny_config``'s (``section__key``; None
    removes a key)."""
    import yaml

    data = {"train": write_lines(tmp_path / "train.json", relation_lines(train_lines, 1)),
            "dev": write_lines(tmp_path / "dev.json", relation_lines(dev_lines, 2)), "max_length": 24,
            "window_overlap": 8}
    if test_lines:
        data["test"] = write_lines(tmp_path / "test.json", relation_lines(test_lines, 4))
    sections = {"data": data, "model": {"encoder": "tiny", "head_size": 16, "dropout": 0.1},
                "train": {"epochs": 8, "min_steps": 0, "batch_size": 16, "lr": 2e-3, "head_lr": 2e-3,
                          "warmup_ratio": 0.05, "seed": 7,
                          "patience": 0, "layer_lr_decay": 1.0, "boundary_smoothing": 0.0, "calibrate": "shared"},
                "device": "cpu", "output_dir": str(tmp_path / "run")}
    for key, value in overrides.items():
        section, name = key.split("__") if "__" in key else (None, key)
        target = sections[section] if section else sections
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(sections, allow_unicode=True), encoding="utf-8")
    return str(path)


def event_lines(count: int, seed: int):
    """Lines of the project's event format of a learnable event task: a person born in a place, a firm
    buying another, one or two events a text (two births: the links tell whose place is whose)."""
    rng = random.Random(seed)

    def birth(offset: int):
        person, place = rng.choice(PEOPLE), rng.choice(PLACES)
        text = f"{person}出生于{place}"
        return text, {"type": "出生", "trigger": {"start": offset + 2, "end": offset + 4},
                      "arguments": [{"role": "人物", "start": offset, "end": offset + 2},
                                    {"role": "地点", "start": offset + 5, "end": offset + 7}]}

    def purchase(offset: int):
        buyer, bought = rng.sample(FIRMS, 2)
        text = f"{buyer}收购{bought}"
        return text, {"type": "收购", "trigger": {"start": offset + 2, "end": offset + 4},
                      "arguments": [{"role": "收购方", "start": offset, "end": offset + 2},
                                    {"role": "被收购方", "start": offset + 4, "end": offset + 6}]}

    lines = []
    for _ in range(count):
        pad = "".join(rng.choice(FILL) for _ in range(rng.randint(0, 3)))
        text, events = pad, []
        for index in range(rng.choice((1, 1, 2))):
            if index:
                text += "，"
            part, event = rng.choice((birth, purchase))(len(text))
            text += part
            events.append(event)
        lines.append({"text": text, "events": events})
    return lines


def event_config(tmp_path, train_lines: int = 200, dev_lines: int = 40, **overrides) -> str:
    """``relation_config`` of a tiny event model on ``event_lines`` (train seed 1, dev seed 2)."""
    import yaml

    sections = yaml.safe_load(open(relation_config(tmp_path, 0, 0, **overrides), encoding="utf-8"))
    sections["data"]["train"] = write_lines(tmp_path / "train.json", event_lines(train_lines, 1))
    sections["data"]["dev"] = write_lines(tmp_path / "dev.json", event_lines(dev_lines, 2))
    sections["data"]["max_length"] = 32
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(sections, allow_unicode=True), encoding="utf-8")
    return str(tmp_path / "config.yaml")
