"""The debug kernel's build inputs, checked on the host (no build, no boot): the version pin read
from the stock image, and the fragment check that stops a build whose config lost an option."""

import re

import pytest

from emunode import debugkernel, kernels


def test_stock_version_is_read_from_the_image(kernel_name):
    if kernel_name != "6.1":
        pytest.skip("the debug kernel is built from the 6.1 source")
    stock = kernels.ensure_kernel("6.1", log=lambda m: None)
    version = debugkernel.stock_version(stock)
    assert re.fullmatch(r"6\.1\.\d+-\d+", version), version
    # the image's own package version, as the manifest's release names its ABI
    assert stock.release.startswith("6.1.0-")


def test_fragment_check_names_dropped_options(tmp_path):
    lines = debugkernel.FRAGMENT.read_text().splitlines()
    wanted = [l for l in lines if l.startswith("CONFIG_") or l.startswith("# CONFIG_")]
    assert any(l == "CONFIG_KASAN=y" for l in wanted)
    config = tmp_path / ".config"
    config.write_text("\n".join(wanted) + "\n")
    assert debugkernel._check_config(config) == []
    # Kconfig dropped lockdep and turned on something the fragment turns off
    text = config.read_text().replace("CONFIG_PROVE_LOCKING=y", "# CONFIG_PROVE_LOCKING is not set")
    text = text.replace("# CONFIG_LOCALVERSION_AUTO is not set", "CONFIG_LOCALVERSION_AUTO=y")
    config.write_text(text)
    assert sorted(debugkernel._check_config(config)) == [
        "CONFIG_LOCALVERSION_AUTO=n (got y)", "CONFIG_PROVE_LOCKING=y (got n)"]


def test_debug_kernel_name_is_known():
    assert kernels.is_known("6.1-debug")
    assert "6.1-debug" in debugkernel.debug_kernels()
    assert "6.1-debug" not in kernels.known_kernels()   # not in the stock kernel matrix


def test_every_debug_patch_exists_and_says_why():
    for name in debugkernel.DEBUG_PATCHES:
        text = (debugkernel.HERE / name).read_text()
        head = text.split("\n--- a/", 1)[0]
        assert len(head.split()) > 20, f"{name} does not say why it is needed"
        assert "\n+++ b/" in text, f"{name} is not a unified diff"


def test_key_follows_the_patches(monkeypatch, tmp_path):
    """A changed patch is a new build: its text is part of the cache key."""
    before = debugkernel._key("6.1.192-2")
    patch = tmp_path / "debug-kernel-test.patch"
    patch.write_text("why\n--- a/x\n+++ b/x\n")
    monkeypatch.setattr(debugkernel, "HERE", tmp_path)
    monkeypatch.setattr(debugkernel, "DEBUG_PATCHES", ("debug-kernel-test.patch",))
    with_test_patch = debugkernel._key("6.1.192-2")
    patch.write_text("why\n--- a/x\n+++ b/x\n@@ changed @@\n")
    assert len({before, with_test_patch, debugkernel._key("6.1.192-2")}) == 3
