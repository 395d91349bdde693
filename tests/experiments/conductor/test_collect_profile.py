"""collect_profile: the payload's profile/ (profile=true) reaches the attempt folder, where the analysis reads it."""

from __future__ import annotations

from experiments.conductor.collect import collect_profile


def test_profile_is_copied_without_tensorboard_and_never_overwritten(tmp_path):
    out = tmp_path / "job" / "out"
    (out / "profile" / "torch_profile").mkdir(parents=True)
    (out / "profile" / "tb").mkdir()
    (out / "profile" / "request.json").write_text("{}")
    (out / "profile" / "torch_profile" / "rank-0.json.gz").write_bytes(b"trace")
    (out / "profile" / "tb" / "events.out.tfevents.1").write_bytes(b"tb")
    attempt = tmp_path / "variants" / "v" / "attempt-1"
    assert collect_profile(out, attempt) == 2
    assert (attempt / "profile" / "torch_profile" / "rank-0.json.gz").read_bytes() == b"trace"
    assert not (attempt / "profile" / "tb").exists()
    (out / "profile" / "request.json").write_text('{"changed": 1}')
    assert collect_profile(out, attempt) == 0
    assert (attempt / "profile" / "request.json").read_text() == "{}"


def test_no_profile_no_copy(tmp_path):
    assert collect_profile(tmp_path / "out", tmp_path / "attempt-1") == 0
    assert not (tmp_path / "attempt-1").exists()
