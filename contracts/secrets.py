"""What a secret is and how it is masked (docs/CONTRACTS.md §10): one definition for every stage."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

MASK = "***"
SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
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


def _secret_url(key: Any, value: Any) -> bool:
    return isinstance(key, str) and key in SECRET_URL_KEYS and isinstance(value, str) and "://" in value


def is_secret(name: str, secret_env: Iterable[str] = ()) -> bool:
    """True for an environment variable whose name contains TOKEN, KEY, SECRET or PASSWORD (any case, e.g.
    ``WANDB_API_KEY``, ``HF_TOKEN``) or that is listed in ``secret_env`` (``cluster.secret_env``)."""
    upper = str(name).upper()
    return any(marker in upper for marker in SECRET_MARKERS) or str(name) in set(secret_env)


def mask_env(env: Mapping[str, Any], secret_env: Iterable[str] = ()) -> dict[str, Any]:
    """``env`` with every secret's value replaced by ``***``."""
    extra = tuple(secret_env)
    return {k: (MASK if is_secret(k, extra) else v) for k, v in env.items()}


def _values(values: Iterable[str]) -> list[str]:
    return sorted({str(v) for v in values if v and str(v) != MASK}, key=len, reverse=True)


def mask_text(text: str, values: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret value (longest first, empty values skipped) and of its
    shell-quoted form replaced by ``***``."""
    for value in _values(values):
        for form in (shlex.quote(value), value):
            text = text.replace(form, MASK)
    return text


def mask_bytes(data: bytes, values: Iterable[str]) -> bytes:
    """``data`` with every secret value replaced by ``***`` (for log files copied byte for byte)."""
    for value in _values(values):
        data = data.replace(value.encode(), MASK.encode())
    return data


def mask_config(cfg: Any, secret_env: Iterable[str] = ()) -> Any:
    """A copy of a nested config (dicts and lists) with the value of every secret-named key masked.

    Switches are not values: a boolean or null under a secret-looking name (``cluster.allow_ssh_secrets``) stays,
    so that a launcher reading the manifest's config sees the user's choice and not a truthy ``***``.
    """
    extra = tuple(secret_env)
    if isinstance(cfg, Mapping):
        return {k: (mask_url(v) if _secret_url(k, v) else MASK if isinstance(k, str) and is_secret(k, extra)
                    and not isinstance(v, Mapping | list | tuple | bool) and v is not None
                    else mask_config(v, extra)) for k, v in cfg.items()}
    if isinstance(cfg, list | tuple):
        return [mask_config(v, extra) for v in cfg]
    return cfg


def mask_override(text: str, secret_env: Iterable[str] = ()) -> str:
    """A command-line override with a secret's value masked (``+cluster.env_vars.HF_TOKEN=abc`` ->
    ``+cluster.env_vars.HF_TOKEN=***``); switches such as ``cluster.allow_ssh_secrets=true`` stay readable."""
    key, sep, value = text.partition("=")
    if value.strip().lower() in ("true", "false", "null", ""):
        return text
    if sep and _secret_url(key.lstrip("+~").split(".")[-1], value.strip("'\"")):
        return f"{key}={mask_url(value.strip(chr(39) + chr(34)))}"
    return f"{key}={MASK}" if sep and is_secret(key.lstrip("+~").split(".")[-1], tuple(secret_env)) else text
