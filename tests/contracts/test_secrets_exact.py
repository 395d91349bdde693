"""CONTRACTS §10: a secret is a declared or well-known credential name, never a knob that contains a word; masking
replaces whole values only, never short or numeric ones, also when a log is streamed in chunks."""

from __future__ import annotations

import io
import random

import pytest

from contracts.secrets import (
    MASK,
    is_secret,
    mask_bytes,
    mask_env,
    mask_stream,
    mask_text,
    maskable,
    weak_secrets,
)

LONG = "hf_planted9Secret"


@pytest.mark.parametrize("name", ["NUM_OF_TOKENS_PER_CHUNK_COMBINE_API", "TOKENIZER_PATH", "MAX_TOKENS",
                                  "NVTE_KEY_CACHE", "KEYSTONE_URL", "TOKEN_DROP_POLICY"])
def test_knobs_that_merely_contain_a_word_are_not_secrets(name: str) -> None:
    assert not is_secret(name)
    assert mask_env({name: "128"}) == {name: "128"}  # variant.json and effective_config keep the knob's value


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "GITHUB_TOKEN", "MY_SERVICE_TOKEN", "NGC_API_KEY",
                                  "db_password", "APP_SECRET", "PGPASSWORD"])
def test_credential_names_are_secrets(name: str) -> None:
    assert is_secret(name)


def test_a_declared_name_is_a_secret_whatever_its_name() -> None:
    assert is_secret("MY_CUSTOM_CRED", ["MY_CUSTOM_CRED"]) and not is_secret("MY_CUSTOM_CRED")


@pytest.mark.parametrize("value", ["128", "32", "1234567", "12345678901", "3.14159265", "short"])
def test_short_and_numeric_values_are_never_masked(value: str) -> None:
    line = f"iteration 32/ 128 | elapsed time per iteration (ms): 1283.2 | {value} |"
    assert not maskable(value) and mask_text(line, [value]) == line
    assert weak_secrets({"X_TOKEN": value}) == ["X_TOKEN"]


def test_masking_replaces_whole_values_only() -> None:
    text = f"token={LONG} quoted='{LONG}' longer={LONG}x prefixed=x{LONG} url=https://u:{LONG}@h/"
    assert mask_text(text, [LONG]) == (f"token={MASK} quoted='{MASK}' longer={LONG}x prefixed=x{LONG} "
                                       f"url=https://u:{MASK}@h/")
    assert mask_bytes(text.encode(), [LONG]) == mask_text(text, [LONG]).encode()


def test_streamed_masking_equals_whole_file_masking_at_any_chunk_size() -> None:
    rng = random.Random(7)
    words = ["a", "1", "_", "-", " ", "\n", LONG, "x" + LONG, LONG + "9", "planted-value-two"]
    secrets = [LONG, "planted-value-two", "32"]
    for _ in range(200):
        data = "".join(rng.choice(words) for _ in range(rng.randint(0, 120))).encode()
        out = io.BytesIO()
        mask_stream(io.BytesIO(data), out, secrets, chunk=rng.randint(1, 50))
        assert out.getvalue() == mask_bytes(data, secrets)
    assert LONG.encode() not in mask_bytes(f"{LONG}\n".encode() * 3, secrets)
