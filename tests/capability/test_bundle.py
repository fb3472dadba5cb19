"""K bundles: released versions are immutable, templates render strictly, prices compute."""

from __future__ import annotations

import shutil

import pytest
from jinja2.sandbox import SecurityError

from datafarm.capability import bundle as kb
from datafarm.capability.releases import RELEASED
from datafarm.errors import InputError, IntegrityError


def test_every_shipped_version_is_a_pinned_release():
    assert kb.available_versions(), "no K bundle shipped"
    for version in kb.available_versions():
        assert version in RELEASED, f"{version} has no pinned hash in datafarm/capability/releases.py"


@pytest.mark.parametrize("version", sorted(RELEASED))
def test_released_bundle_hash_is_unchanged(version):
    root = kb.BUNDLES_DIR / version
    # Recompute from the files themselves, not from the manifest, and compare with the pinned hash.
    assert kb.compute_manifest_hash(root) == RELEASED[version], (
        f"released capability {version} changed; make a new version instead"
    )
    b = kb.load(version)
    assert b.sha256 == RELEASED[version]
    assert b.verify() == []


def _copy_bundle(tmp_path, monkeypatch, version="k1"):
    dst = tmp_path / "bundles"
    shutil.copytree(kb.BUNDLES_DIR / version, dst / version)
    monkeypatch.setattr(kb, "BUNDLES_DIR", dst)
    return dst / version


def test_a_modified_bundle_is_refused_and_the_file_named(tmp_path, monkeypatch):
    root = _copy_bundle(tmp_path, monkeypatch)
    (root / "skills" / "expert.md").write_text("tampered\n")
    with pytest.raises(IntegrityError) as e:
        kb.load("k1")
    assert "skills/expert.md: content changed since release" in str(e.value)


def test_an_added_file_is_refused(tmp_path, monkeypatch):
    root = _copy_bundle(tmp_path, monkeypatch)
    (root / "skills" / "extra.md").write_text("new\n")
    with pytest.raises(IntegrityError, match="skills/extra.md: not in the manifest"):
        kb.load("k1")


def test_unknown_version_names_the_available_ones():
    with pytest.raises(InputError) as e:
        kb.load("k999")
    assert "k1" in str(e.value)


def test_templates_render_with_variables_and_refuse_missing_ones():
    b = kb.load()
    text = b.render(
        "prompts/author.md.j2",
        task="Nest the red cup in the blue cup.",
        robot="piper-dual",
        mode="ood",
        ood_axes={"tablecloth": ["checker", "linen"]},
        stage="grounding",
        skill=b.skill("grounding"),
        schema="{}",
    )
    assert "Nest the red cup in the blue cup." in text
    assert "tablecloth: checker, linen" in text
    with pytest.raises(InputError, match="template variable missing"):
        b.render("prompts/author.md.j2", task="x")


def test_templates_are_sandboxed():
    b = kb.load()
    # A task variable cannot reach Python internals through the template engine.
    evil = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    env = b._jinja
    with pytest.raises(SecurityError, match="unsafe"):
        env.from_string(evil).render()


def test_price_table_costs():
    prices = kb.load().price_table()
    assert prices.cost_usd("builtin", 10_000, 10_000) == 0.0
    assert prices.cost_usd("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(12.5)
    with pytest.raises(KeyError, match="no price"):
        prices.cost_usd("no-such-model", 1, 1)
