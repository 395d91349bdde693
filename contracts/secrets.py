"""What a secret is and how it is masked (docs/CONTRACTS.md §10): one definition for every stage.

A secret is a name declared in ``cluster.secret_env`` or a well-known credential name: one that ends in
``_TOKEN``, ``_API_KEY``, ``_PASSWORD``, ``_SECRET`` (any case) or is one of :data:`SECRET_NAMES`. A knob that merely
contains such a word (HybridEP's ``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API``, ``TOKENIZER_PATH``) is not one.

Masking in free text (logs, scripts, console lines) replaces whole values only: an occurrence of a secret value
that is part of a longer word (a letter, digit or ``_`` on either side) stays. A value shorter than
:data:`MIN_SECRET_LEN` characters or made of digits only would also match ordinary numbers in a log ("128" in a
step time), so it is never masked; the planner refuses such a value instead (:func:`weak_secrets`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from typing import IO, Any
from urllib.parse import unquote, urlsplit

MASK = "***"
MIN_SECRET_LEN = 8
SECRET_SUFFIXES = ("_TOKEN", "_API_KEY", "_PASSWORD", "_SECRET")
# Exact names of common credentials whose name has no suffix above, or that are too common to leave to it
SECRET_NAMES = frozenset({
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "NGC_API_KEY",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "PGPASSWORD", "TOKEN", "PASSWORD", "SECRET", "API_KEY",
})
_NUMERIC = re.compile(r"^[\d.,:+-]*$")
_WORD = "A-Za-z0-9_"
SECRET_URL_KEYS = ("notify",)
"""Config keys whose value is a URL that carries its own credential (a Slack incoming webhook): shown and stored as
``scheme://host/***`` (:func:`mask_url`), unless the value is ``env:NAME`` (a name, not the secret)."""


def mask_url(url: str) -> str:
    """``scheme://host/***``: what may be shown of a URL whose path, query or user part is a secret (a webhook).
    ``env:NAME`` and other non-URLs without ``://`` are returned as they are."""
    text = str(url)
    if "://" not in text:
        return text
    parts = urlsplit(text)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/{MASK}"


# The user:password@ part of a database URL as SQLAlchemy 2.1 parses it (sqlalchemy/engine/url.py ``_parse_url``:
# username ``[^:/]*``, password ``[^@]*``, up to the first ``@``); an http(s) URL is split by urllib instead.
_DB_PASSWORD = re.compile(r"^(?P<head>[\w+]+://[^:/]*:)(?P<password>[^@]*)@")


def url_credentials(url: Any) -> tuple[str | None, str | None]:
    """The user and the (percent-decoded) password of ``url``'s user part, ``(None, None)`` for a value that is no
    URL or does not parse; the password is None when there is none."""
    if not isinstance(url, str) or "://" not in url:
        return None, None
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return None, None
    return (unquote(user) if user else None), (unquote(password) if password is not None else None)


def hide_password(url: Any) -> Any:
    """``url`` with the password of its user part shown as ``***``, for every file and console line this tool
    writes: ``postgresql://user:pass@host/db`` -> ``postgresql://user:***@host/db`` (what SQLAlchemy's
    ``render_as_string(hide_password=True)`` shows), ``http://user:pass@host:5000`` -> ``http://user:***@host:5000``.
    A value that is not a string, has no ``://`` or no password is returned as it is; ``***`` stays ``***``."""
    if not isinstance(url, str) or "://" not in url or "@" not in url:
        return url
    if url.split("://", 1)[0].lower() in ("http", "https"):
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = f"{parts.username or ''}:{MASK}@{parts.netloc.rpartition('@')[2]}"
        return parts._replace(netloc=netloc).geturl()
    m = _DB_PASSWORD.match(url)
    if m is None or not m["password"]:
        return url
    return f"{m['head']}{MASK}@{url[m.end():]}"


def _secret_url(key: Any, value: Any) -> bool:
    return isinstance(key, str) and key in SECRET_URL_KEYS and isinstance(value, str) and "://" in value


def is_secret(name: str, secret_env: Iterable[str] = ()) -> bool:
    """True for an environment variable listed in ``secret_env`` (``cluster.secret_env``) or with a well-known
    credential name: ending in ``_TOKEN``, ``_API_KEY``, ``_PASSWORD`` or ``_SECRET`` (any case: ``db_password``),
    or one of :data:`SECRET_NAMES` (``HF_TOKEN``, ``WANDB_API_KEY``, ...). ``TOKENIZER_PATH`` and
    ``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API`` are not secrets."""
    upper = str(name).upper()
    return upper in SECRET_NAMES or upper.endswith(SECRET_SUFFIXES) or str(name) in set(secret_env)


def maskable(value: str) -> bool:
    """True for a value masking can replace safely: at least :data:`MIN_SECRET_LEN` characters and not a number."""
    text = str(value)
    return len(text) >= MIN_SECRET_LEN and not _NUMERIC.match(text) and text != MASK


def weak_secrets(values: Mapping[str, Any]) -> list[str]:
    """The names in ``values`` (secret name -> value) whose non-empty value masking could not replace safely
    (:func:`maskable`): the planner refuses them, since a short value such as ``32`` would also hide step times."""
    return sorted(k for k, v in values.items() if v not in (None, "", MASK) and not maskable(str(v)))


def mask_env(env: Mapping[str, Any], secret_env: Iterable[str] = ()) -> dict[str, Any]:
    """``env`` with every secret's value replaced by ``***``."""
    extra = tuple(secret_env)
    return {k: (MASK if is_secret(k, extra) else v) for k, v in env.items()}


def _values(values: Iterable[str]) -> list[str]:
    """The maskable values, longest first (a value that contains another is replaced whole)."""
    return sorted({str(v) for v in values if v and maskable(str(v))}, key=len, reverse=True)


def _forms(values: Iterable[str]) -> list[str]:
    forms = {f for v in _values(values) for f in (v, shlex.quote(v))}
    return sorted(forms, key=len, reverse=True)


def _pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    forms = _forms(values)
    if not forms:
        return None
    return re.compile(f"(?<![{_WORD}])(?:{'|'.join(map(re.escape, forms))})(?![{_WORD}])")


def _bytes_pattern(values: Iterable[str]) -> re.Pattern[bytes] | None:
    forms = _forms(values)
    if not forms:
        return None
    alt = b"|".join(re.escape(f.encode()) for f in forms)
    return re.compile(b"(?<![" + _WORD.encode() + b"])(?:" + alt + b")(?![" + _WORD.encode() + b"])")


def mask_text(text: str, values: Iterable[str]) -> str:
    """``text`` with every whole occurrence of each maskable secret value (and of its shell-quoted form) replaced
    by ``***``; an occurrence inside a longer word, and values :func:`maskable` rejects, stay."""
    pattern = _pattern(values)
    return pattern.sub(MASK, text) if pattern else text


def mask_bytes(data: bytes, values: Iterable[str]) -> bytes:
    """``data`` masked like :func:`mask_text` (for log files copied byte for byte)."""
    pattern = _bytes_pattern(values)
    return pattern.sub(MASK.encode(), data) if pattern else data


def mask_stream(src: IO[bytes], dst: IO[bytes], values: Iterable[str], chunk: int = 1 << 20) -> int:
    """Copy ``src`` to ``dst`` masked like :func:`mask_bytes`, reading ``chunk`` bytes at a time (memory stays
    about two chunks for a log of any size). A value cut by a chunk border is still found: the last
    (longest value + 1) bytes of a chunk wait for the next one. Returns the number of bytes written."""
    pattern = _bytes_pattern(values)
    written = 0
    if pattern is None:
        while data := src.read(chunk):
            written += dst.write(data)
        return written
    keep = max(len(f.encode()) for f in _forms(values)) + 1
    carry, ctx = b"", b""  # ctx: the one byte before carry, for the look-behind
    mask = MASK.encode()
    while True:
        data = src.read(chunk)
        buf = ctx + carry + data
        start = len(ctx)
        cut = len(buf) if not data else len(buf) - keep
        if cut <= start:
            if not data:
                return written
            carry = buf[start:]
            continue
        out, pos = [], start
        for m in pattern.finditer(buf, start):
            if m.start() >= cut:
                break
            out.append(buf[pos:m.start()])
            out.append(mask)
            pos = m.end()
        cut = max(cut, pos)
        out.append(buf[pos:cut])
        written += dst.write(b"".join(out))
        if not data:
            return written
        ctx, carry = buf[cut - 1:cut], buf[cut:]


def mask_config(cfg: Any, secret_env: Iterable[str] = ()) -> Any:
    """A copy of a nested config (dicts and lists) with the value of every secret-named key masked.

    Switches are not values: a boolean or null under a secret-looking name (``cluster.allow_ssh_secrets``) stays,
    so that a launcher reading the manifest's config sees the user's choice and not a truthy ``***``. Every other
    string that is a URL has its password hidden (:func:`hide_password`: ``history.url``, ``history.mlflow``,
    ``history.page_url``, ...).
    """
    extra = tuple(secret_env)
    if isinstance(cfg, Mapping):
        return {k: (mask_url(v) if _secret_url(k, v) else MASK if isinstance(k, str) and is_secret(k, extra)
                    and not isinstance(v, Mapping | list | tuple | bool) and v is not None
                    else mask_config(v, extra)) for k, v in cfg.items()}
    if isinstance(cfg, list | tuple):
        return [mask_config(v, extra) for v in cfg]
    return hide_password(cfg)


def mask_override(text: str, secret_env: Iterable[str] = ()) -> str:
    """A command-line override with a secret's value masked (``+cluster.env_vars.HF_TOKEN=abc`` ->
    ``+cluster.env_vars.HF_TOKEN=***``) and a URL's password hidden (``history.mlflow=http://u:***@host``);
    switches such as ``cluster.allow_ssh_secrets=true`` stay readable."""
    key, sep, value = text.partition("=")
    if value.strip().lower() in ("true", "false", "null", ""):
        return text
    if sep and _secret_url(key.lstrip("+~").split(".")[-1], value.strip("'\"")):
        return f"{key}={mask_url(value.strip(chr(39) + chr(34)))}"
    if sep and is_secret(key.lstrip("+~").split(".")[-1], tuple(secret_env)):
        return f"{key}={MASK}"
    return f"{key}={hide_password(value)}" if sep else text
