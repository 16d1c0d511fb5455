"""From a row's columns to a prompt: `dataset.fields`, `dataset.prompt_template`, Inspect-style message lists."""

from __future__ import annotations

import json
from collections.abc import Iterable

from hermes_runner.config import DatasetConfig
from hermes_runner.config.templating import compile_template, environment, render
from hermes_runner.dataset.base import Prompt, canonical_digest, id_digest
from hermes_runner.errors import TemplateRefused

# The columns each role is taken from when `dataset.fields` names none, in order of preference.
DEFAULTS = {
    "prompt": ("prompt", "input", "conversations", "messages"),  # text; Inspect; ShareGPT; OpenAI chat
    "image": ("image", "image_name", "docker_image"),
    "cwd": ("cwd",),
    "target": ("target",),
    "verify": ("verify",),
}
TEMPLATE = "dataset.prompt_template"
ROLES = {"user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant", "system": "system"}


class RowError(Exception):
    """Why one row cannot be a prompt (it goes to rejected.jsonl)."""


class Mapping:
    """One dataset's rule from row to prompt."""

    def __init__(self, opts: DatasetConfig):
        f = opts.fields
        self.explicit = {k: v for k, v in vars_of(f).items() if v is not None}
        self.id = f.id
        self.template = compile_template(opts.prompt_template, TEMPLATE) if opts.prompt_template else None
        self.template_vars = _variables(opts.prompt_template) if opts.prompt_template else set()

        # Per role: the candidate columns, and whether they were named (hot path: looked up once here).
        self._cols = {role: ((self.explicit[role],), True) if role in self.explicit else (names, False)
                      for role, names in DEFAULTS.items()}  # fmt: skip

    def column(self, role: str, row: dict) -> str | None:
        """The column that plays `role` in this row: an explicit mapping, else the first default present
        (for the prompt) or present and not null (the others: `image: null, docker_image: x` is x)."""
        cols, named = self._cols[role]
        if named:
            return cols[0]
        for c in cols:
            if c in row and (role == "prompt" or row[c] is not None):
                return c
        return None

    # -- checks against the schema or the first rows, before any model call -----------------------------

    def missing(self, columns: Iterable[str]) -> list[str]:
        """What the mapping names that `columns` lack, said as options."""
        have = set(columns)
        out = [f"dataset.fields.{role} = {col!r}" for role, col in self.explicit.items() if col not in have]
        out += [f"dataset.prompt_template variable {v!r}" for v in sorted(self.template_vars - have)]
        return out

    # -- one row -----------------------------------------------------------------------------------------

    def prompt(self, row: dict, index: int, key: str, binary: frozenset[str] = frozenset()) -> Prompt:
        """The row as a prompt (RowError: why it cannot be one); `key` is made by the caller from `base_key`.
        `binary`: the row's columns of binary data that is not UTF-8 (a prompt made of one is refused)."""
        used: set[str] = set()
        messages = system = None
        if self.template is not None:
            if found := sorted(binary & self.template_vars):
                raise RowError(f"{found[0]!r} is binary data, not UTF-8 text: a prompt must be text")
            text = self._render(row)
        else:
            col = self.column("prompt", row)
            if col is None:
                raise RowError(
                    "missing 'prompt' (nor 'input', 'conversations', 'messages'; another column: "
                    "dataset.fields.prompt or dataset.prompt_template)"
                )
            if col not in row:
                raise RowError(f"missing {col!r} (dataset.fields.prompt)")
            used.add(col)
            if col in binary:
                raise RowError(f"{col!r} is binary data, not UTF-8 text: a prompt must be text")
            text, messages, system = _prompt_value(row[col], col)
        if "\x00" in text or "\x00" in (system or "") or any("\x00" in m["content"] for m in messages or ()):
            raise RowError("the prompt holds a NUL character (\\u0000): a prompt must be text without NUL")
        image = self._text_field("image", row, used)
        cwd = self._text_field("cwd", row, used)
        target, verify = self._answer("target", row), self._answer("verify", row)
        fields = {k: v for k, v in row.items() if k not in used}
        # What the model is given, hashed when the identity is the row id (a change is told, see run planning).
        digest = canonical_digest({"p": text, "m": messages, "s": system, "i": image, "c": cwd}) if self.id else ""
        return Prompt(index, key, text, image, cwd, fields, messages, system, target, verify, digest)

    def base_key(self, row: dict) -> str:
        """The digest a key is made of: the row id when `dataset.fields.id` is set, else the whole row."""
        if self.id is None:
            return canonical_digest(row)
        if row.get(self.id) is None:
            raise RowError(f"missing {self.id!r} (dataset.fields.id)")
        value = row[self.id]
        if isinstance(value, (dict, list, bool)) or value == "":
            raise RowError(f"{self.id!r} (dataset.fields.id) is {json.dumps(value)[:40]}, not a string or number")
        return id_digest(str(value))

    def _render(self, row: dict) -> str:
        import jinja2

        try:
            text = render(self.template, TEMPLATE, row)
        except TemplateRefused as exc:
            raise RowError(str(exc)) from None
        except jinja2.UndefinedError as exc:
            raise RowError(f"dataset.prompt_template: {exc.message}") from None
        except Exception as exc:  # noqa: BLE001 - a filter on a value of the wrong type, ...: this row only
            raise RowError(f"dataset.prompt_template failed on this row: {type(exc).__name__}: {exc}") from None
        if not text.strip():
            raise RowError("dataset.prompt_template renders an empty prompt for this row")
        return text

    def _text_field(self, role: str, row: dict, used: set[str]) -> str | None:
        cols, named = self._cols[role]
        col = None
        for c in cols:
            if c in row:
                if not named:
                    used.add(c)  # (as before: image, docker_image, cwd are not kept twice)
                if col is None and (named or row[c] is not None):
                    col = c
        if col is None:
            return None
        value = row.get(col)
        if value is not None and not isinstance(value, str):
            raise RowError(f"{col!r} is {type(value).__name__}, not a string")
        used.add(col)
        return value or None  # an empty cell (CSV, Parquet) is no value

    def answers(self, row: dict) -> dict[str, str]:
        """The row's `target` and `verify` as the mapping reads them (a role with no value is left out)."""
        found = {role: self._answer(role, row) for role in ("target", "verify")}
        return {role: value for role, value in found.items() if value is not None}

    def _answer(self, role: str, row: dict) -> str | None:
        """target / verify as text: a string as it is, any other value as JSON."""
        cols, named = self._cols[role]
        value = row.get(cols[0])
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, sort_keys=True)


def vars_of(obj: object) -> dict:
    import dataclasses

    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _prompt_value(value: object, col: str) -> tuple[str, list[dict] | None, str | None]:
    """(text, opening messages, row system message) of a prompt column: a string, or a message list."""
    if isinstance(value, str):
        if not value.strip():
            raise RowError(f"{col!r} is empty")
        return value, None, None
    if isinstance(value, list):
        return _messages(value, col)
    raise RowError(f"{col!r} is {type(value).__name__}, not a string")


def _messages(items: list, col: str) -> tuple[str, list[dict], str | None]:
    """An Inspect-style (role/content) or ShareGPT-style (from/value) message list as opening messages."""
    out, system = [], []
    for i, m in enumerate(items):
        if not isinstance(m, dict):
            raise RowError(f"{col!r}[{i}] is {type(m).__name__}, not a message object")
        role = ROLES.get(str(m.get("role", m.get("from"))))
        if role is None:
            raise RowError(f"{col!r}[{i}] has role {m.get('role', m.get('from'))!r}: only system, user, assistant")
        content = _content(m.get("content", m.get("value")), f"{col!r}[{i}]")
        if role == "system":
            system.append(content)
        else:
            out.append({"role": role, "content": content})
    while out and out[-1]["role"] == "assistant":
        out.pop()  # a finished conversation (ShareGPT): its prompt is run again from its last user turn
    if not out:
        raise RowError(f"{col!r} holds no user message")
    return out[-1]["content"], out, "\n\n".join(system) or None


def _content(value: object, where: str) -> str:
    """A message's text: a string, or a list of text parts ({type: text, text})."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in value):
        return "".join(str(p.get("text", "")) for p in value)
    raise RowError(f"{where} content is not text (only strings and text parts are supported)")


def _variables(template: str) -> set[str]:
    """The row columns a template reads (its undeclared variables)."""
    from jinja2 import meta

    env = environment()
    return set(meta.find_undeclared_variables(env.parse(template))) - set(env.globals)
