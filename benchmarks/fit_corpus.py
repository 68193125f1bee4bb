"""The fit corpus: agent sessions built from text that ships inside installed packages, reproducibly.

Run ``python benchmarks/fit_corpus.py`` to print its make-up. Sessions are built by :func:`sessions` from a seed,
so the same seed gives the same corpus on every machine with the same packages:

* prose: docstrings of the standard library (``inspect.getdoc``);
* code: slices of the standard library's and installed packages' Python sources;
* JSON tool output: subtrees of botocore's service models (``botocore/data``), compact or indented;
* logs: log lines made from a fixed grammar (timestamps, levels, paths, ids, durations, prose words);
* CJK and other scripts: CLDR names (languages, territories, months) from babel's locale data for zh, ja, ko,
  ru, el, ar, hi, th and he, joined into sentences;
* base64: PNG images shipped with mkdocs-material and random bytes, as ``data:`` URLs.
"""

from __future__ import annotations

import base64
import gzip
import importlib
import inspect
import json
import pathlib
import random
import sysconfig
from collections.abc import Callable
from functools import cache
from typing import Any

from ravi.kernel.messages import ChatMessage, ToolCallBlock

CLASSES = ("prose", "code", "json", "logs", "cjk", "scripts", "base64")


@cache
def _docstrings() -> list[str]:
    out = []
    for name in (
        "os",
        "collections",
        "json",
        "asyncio",
        "pathlib",
        "itertools",
        "functools",
        "typing",
        "re",
        "datetime",
        "statistics",
        "textwrap",
        "argparse",
        "logging",
        "http.client",
        "email.message",
        "urllib.parse",
        "subprocess",
        "shutil",
        "socket",
        "threading",
        "decimal",
        "fractions",
        "csv",
    ):
        module = importlib.import_module(name)
        for _, value in sorted(vars(module).items()):
            doc = inspect.getdoc(value) if callable(value) else None
            if doc and len(doc) > 200:
                out.append(doc)
    return out


@cache
def _sources() -> list[pathlib.Path]:
    roots = [pathlib.Path(sysconfig.get_paths()["stdlib"]), pathlib.Path(sysconfig.get_paths()["purelib"])]
    files = []
    for root in roots:
        files += sorted(p for p in root.glob("*/*.py") if p.stat().st_size > 4_000)[:400]
    return files


@cache
def _service_models() -> list[pathlib.Path]:
    import botocore

    data = pathlib.Path(botocore.__file__).parent / "data"
    return sorted(data.glob("*/*/service-2.json*"))[:150]


def _load_json(path: pathlib.Path) -> Any:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


@cache
def _names(locale: str) -> list[str]:
    from babel import Locale

    loc = Locale.parse(locale)
    names = list(loc.languages.values()) + list(loc.territories.values())
    names += list(loc.months["format"]["wide"].values()) + list(loc.days["format"]["wide"].values())
    return sorted(set(names))


def prose(rng: random.Random, size: int) -> str:
    docs = _docstrings()
    out = ""
    while len(out) < size:
        out += rng.choice(docs) + "\n\n"
    return out[:size]


def code(rng: random.Random, size: int) -> str:
    lines = rng.choice(_sources()).read_text(errors="replace").splitlines()
    start = rng.randrange(max(1, len(lines) - 20))
    out = "\n".join(lines[start:])
    return out[:size]


def json_output(rng: random.Random, size: int) -> str:
    tree = _load_json(rng.choice(_service_models()))
    node = tree
    for _ in range(rng.randint(1, 3)):
        if isinstance(node, dict) and node:
            node = node[rng.choice(sorted(node))]
    text = json.dumps(node, indent=rng.choice([None, 2]), ensure_ascii=rng.random() < 0.5)
    return text[:size]


def logs(rng: random.Random, size: int) -> str:
    words = prose(rng, 2_000).split()
    lines = []
    while sum(map(len, lines)) < size:
        month, day, hour, minute, second = (rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23),
                                            rng.randint(0, 59), rng.randint(0, 59))  # fmt: skip
        ts = f"2026-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{rng.randint(0, 999):03d}Z"
        level = rng.choice(["INFO", "DEBUG", "WARN", "ERROR"])
        module = rng.choice(words).strip(".,:;()")
        where = f"{rng.choice(['api', 'worker', 'db', 'auth'])}/{module}.py:{rng.randint(1, 900)}"
        msg = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        ip = f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        extra = f"req={rng.getrandbits(64):016x} ip={ip} took={rng.random() * 900:.1f}ms"
        lines.append(f"{ts} {level:5} [{where}] {msg} {extra}")
    return "\n".join(lines)[:size]


def cjk(rng: random.Random, size: int) -> str:
    locale = rng.choice(["zh", "ja", "ko"])
    names = _names(locale)
    out = ""
    while len(out) < size:
        out += rng.choice(["、", "，", "。", " ", "：", "・"]).join(rng.choice(names) for _ in range(rng.randint(3, 9)))
        out += "。\n" if locale != "ko" else ". "
    return out[:size]


def scripts(rng: random.Random, size: int) -> str:
    names = _names(rng.choice(["ru", "el", "ar", "hi", "th", "he", "uk", "bg"]))
    out = ""
    while len(out) < size:
        out += ", ".join(rng.choice(names) for _ in range(rng.randint(3, 9))) + ". "
    return out[:size]


@cache
def _images() -> list[bytes]:
    import material

    return [p.read_bytes() for p in sorted(pathlib.Path(material.__file__).parent.rglob("*.png"))]


def base64_image(rng: random.Random, size: int) -> str:
    data = rng.choice(_images()) if rng.random() < 0.3 else rng.randbytes(max(16, size * 3 // 4))
    return ("data:image/png;base64," + base64.b64encode(data).decode())[:size]


MAKERS: dict[str, Callable[[random.Random, int], str]] = {
    "prose": prose,
    "code": code,
    "json": json_output,
    "logs": logs,
    "cjk": cjk,
    "scripts": scripts,
    "base64": base64_image,
}


def text(kind: str, rng: random.Random, size: int) -> str:
    """A text of ``kind`` with at most ``size`` characters (at least one)."""
    return MAKERS[kind](rng, size) or "."


def session(rng: random.Random, turns: int) -> list[tuple[str, ChatMessage]]:
    """One agent session: (content class, message) pairs, with tool loops whose results are of every class."""
    kinds = list(CLASSES)
    focus = rng.choice(kinds)  # each session leans on one kind of tool output
    out: list[tuple[str, ChatMessage]] = [("prose", ChatMessage.system(prose(rng, rng.randint(200, 1_500))))]
    for turn in range(turns):
        lang = rng.choice(["prose", "prose", "cjk", "scripts"])
        out.append((lang, ChatMessage.user(text(lang, rng, rng.randint(20, 600)))))
        for step in range(rng.randint(0, 3)):
            kind = focus if rng.random() < 0.6 else rng.choice(kinds)
            call = ToolCallBlock(id=f"c{turn}-{step}", name=f"fetch_{kind}", arguments={"query": prose(rng, 60)})
            out.append(("prose", ChatMessage.assistant(None, tool_calls=[call])))
            size = rng.choice([200, 1_000, 4_000, 12_000])
            out.append((kind, ChatMessage.tool(call.id, text(kind, rng, rng.randint(size // 4, size)))))
        out.append((lang, ChatMessage.assistant(text(lang, rng, rng.randint(40, 1_500)))))
    return out


def sessions(n: int = 200, seed: int = 7) -> list[list[tuple[str, ChatMessage]]]:
    """``n`` sessions of 5 to 60 turns."""
    rng = random.Random(seed)
    return [session(rng, rng.randint(5, 60)) for _ in range(n)]


def main() -> None:
    corpus = sessions()
    counts: dict[str, int] = {}
    chars: dict[str, int] = {}
    for s in corpus:
        for kind, message in s:
            counts[kind] = counts.get(kind, 0) + 1
            chars[kind] = chars.get(kind, 0) + sum(len(t) for t in [message.text] if t)
    print(f"{len(corpus)} sessions, {sum(map(len, corpus))} messages")
    for kind in CLASSES:
        print(f"  {kind:8} {counts.get(kind, 0):6} messages {chars.get(kind, 0):>12,} chars")


if __name__ == "__main__":
    main()
