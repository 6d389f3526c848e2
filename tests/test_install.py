"""From source tree to node (docs/fleet.md), host only: the `gdrpeer` binary copied alone
checks with its built-in rule data, `make install DESTDIR=` lays out exactly the expected tree,
each man page lists exactly the options `--help` lists, and the bash completion offers them.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from emunode import kernels
from helpers.check_cli import gdrpeer_bin
from helpers.paths import REF, REPO

SUBCOMMANDS = ["topo", "check", "snapshot", "verify"]
INPUT = REF / "stelline-asus-esc8000a-e12.md"


def run(binary, *args, env_extra=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "GDRPEER_DATA_DIR"}
    env.update(env_extra or {})
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def test_copied_binary_checks_with_builtin_data(tmp_path):
    """The issue's report: build/bin/gdrpeer copied to a node looked for the build tree's topology/."""
    alone = tmp_path / "empty" / "gdrpeer"
    alone.parent.mkdir()
    shutil.copy2(gdrpeer_bin(), alone)
    version = run(alone, "--version", cwd=alone.parent)
    assert version.returncode == 0, version.stderr
    assert re.search(r"rule data: built-in \(topology/\*\.json of this build, fingerprint [0-9a-f]{16}\)",
                     version.stdout), version.stdout
    # The same verdicts as the source tree's data gives (the data is the same files).
    copied = run(alone, "check", "--json", INPUT, cwd=alone.parent)
    tree = run(alone, "check", "--json", INPUT, env_extra={"GDRPEER_DATA_DIR": str(REPO / "topology")})
    assert copied.returncode == tree.returncode and copied.returncode in (0, 1, 2), copied.stderr
    assert json.loads(copied.stdout) == json.loads(tree.stdout)
    assert json.loads(copied.stdout)["pairs"], "no pairs checked: the comparison proves nothing"
    # Nothing outside the C library, libbz2 and the kernel's vDSO is needed on the node.
    libs = subprocess.run(["ldd", str(alone)], capture_output=True, text=True).stdout
    names = {re.split(r"[\s=]", line.strip())[0] for line in libs.splitlines() if line.strip()}
    assert names <= {"linux-vdso.so.1", "libbz2.so.1.0", "libc.so.6", "libm.so.6", "/lib64/ld-linux-x86-64.so.2"}, libs


def test_data_overrides_builtin(tmp_path):
    """GDRPEER_DATA_DIR, --data-dir and <prefix>/share/gdrpeer/topology each replace the built-in data."""
    data = tmp_path / "prefix" / "share" / "gdrpeer" / "topology"
    shutil.copytree(REPO / "topology", data)
    # A rule file an operator broke: its path in the error proves which data was read.
    (data / "platforms.json").write_text('{"schema": 1, "rules": [{"id": "x"}]}')
    binary = tmp_path / "prefix" / "bin" / "gdrpeer"
    binary.parent.mkdir()
    shutil.copy2(gdrpeer_bin(), binary)
    p = run(binary, "check", INPUT)
    assert p.returncode == 78 and f"{data}/platforms.json" in p.stderr, p.stderr
    assert f"rule data: {data}" in run(binary, "--version").stdout
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(data, elsewhere)
    p = run(binary, "check", INPUT, env_extra={"GDRPEER_DATA_DIR": str(elsewhere)})
    assert p.returncode == 78 and f"{elsewhere}/platforms.json" in p.stderr, p.stderr
    assert f"rule data: {elsewhere} (from GDRPEER_DATA_DIR)" in run(
        binary, "--version", env_extra={"GDRPEER_DATA_DIR": str(elsewhere)}).stdout
    p = run(binary, "check", "--data-dir", REPO / "topology", INPUT)
    assert p.returncode in (0, 1, 2), p.stderr


# Every file `make install PREFIX=/usr DESTDIR=...` installs (docs/fleet.md, "Installing on a node").
INSTALLED = {
    "usr/bin/gdrpeer",
    "usr/lib/libgdrpeer.a",
    "usr/lib/pkgconfig/gdrpeer.pc",
    "usr/include/gdrpeer/gdrpeer.hpp",
    "usr/include/gdrpeer/error.hpp",
    "usr/include/gdrpeer/unique_fd.hpp",
    "usr/include/gdrpeer/uapi/gdrpeer.h",
    "usr/share/gdrpeer/topology/devices.json",
    "usr/share/gdrpeer/topology/gpus.json",
    "usr/share/gdrpeer/topology/root_complexes.json",
    "usr/share/gdrpeer/topology/platforms.json",
    "usr/share/gdrpeer/nhc/gdrpeer.nhc",
    "usr/share/man/man1/gdrpeer.1",
    "usr/share/man/man1/gdrpeer-topo.1",
    "usr/share/man/man1/gdrpeer-check.1",
    "usr/share/man/man1/gdrpeer-snapshot.1",
    "usr/share/man/man1/gdrpeer-verify.1",
    "usr/share/bash-completion/completions/gdrpeer",
    "usr/share/doc/gdrpeer/README.md",
    "usr/share/doc/gdrpeer/check.md",
    "usr/share/doc/gdrpeer/verify.md",
    "usr/share/doc/gdrpeer/fleet.md",
    "usr/share/doc/gdrpeer/driver.md",
    "etc/udev/rules.d/70-gdrpeer.rules",
    "etc/sysusers.d/gdrpeer.conf",
    "etc/modprobe.d/gdrpeer.conf",
    "etc/systemd/system/gdrpeer-check.service",
    "etc/systemd/system/gdrpeer-check.timer",
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    dest = tmp_path_factory.mktemp("destdir")
    build = Path(os.environ.get("GDRPEER_BUILD", REPO / "build"))
    p = subprocess.run(["make", "-s", "install", f"BUILD={build}", "PREFIX=/usr", f"DESTDIR={dest}"],
                       cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    return dest


def test_make_install_tree(installed):
    files = {str(p.relative_to(installed)) for p in installed.rglob("*") if p.is_file() or p.is_symlink()}
    assert files == INSTALLED, f"missing: {sorted(INSTALLED - files)}\nunexpected: {sorted(files - INSTALLED)}"
    assert os.access(installed / "usr/bin/gdrpeer", os.X_OK)
    for f in files - {"usr/bin/gdrpeer"}:
        assert (installed / f).stat().st_mode & 0o777 == 0o644, f
    pc = subprocess.run(["pkg-config", "--variable=prefix", "gdrpeer"], capture_output=True, text=True,
                        env=dict(os.environ, PKG_CONFIG_LIBDIR=str(installed / "usr/lib/pkgconfig")))
    assert Path(pc.stdout.strip()).resolve() == installed / "usr", pc.stdout + pc.stderr
    for unit in ("gdrpeer-check.service",):
        text = (installed / "etc/systemd/system" / unit).read_text()
        assert "@BINDIR@" not in text and "exec /usr/bin/gdrpeer check --format prometheus" in text, text
    # The installed binary finds the installed data beside it (<prefix>/share/gdrpeer/topology).
    v = run(installed / "usr/bin/gdrpeer", "--version")
    assert f"rule data: {installed}/usr/share/gdrpeer/topology" in v.stdout, v.stdout


def test_make_install_module(tmp_path, gdrpeer_ko, kernel_name):
    """make install-module: the built module into /lib/modules/KVER/updates, indexed by depmod."""
    release = kernels.ensure_kernel(kernel_name).release
    p = subprocess.run(["make", "-s", "install-module", f"KVER={release}", f"MODOUT={gdrpeer_ko.parent}",
                        f"DESTDIR={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    moddir = tmp_path / "lib" / "modules" / release
    assert (moddir / "updates" / "gdrpeer.ko").read_bytes() == gdrpeer_ko.read_bytes()
    assert "updates/gdrpeer.ko:" in (moddir / "modules.dep").read_text()
    p = subprocess.run(["make", "-s", "install-module", f"KVER={release}", f"MODOUT={tmp_path / 'none'}",
                        f"DESTDIR={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "gdrpeer.ko is missing" in p.stderr, p.stderr


def test_installed_library_builds_a_program(installed, tmp_path):
    """The headers and pkg-config file are enough to build against libgdrpeer."""
    src = tmp_path / "probe.cpp"
    src.write_text('#include <gdrpeer/gdrpeer.hpp>\n#include <gdrpeer/uapi/gdrpeer.h>\n'
                   'int main() { return gdrpeer::kDefaultDevicePath[0] == \'/\' ? 0 : 1; }\n')
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(installed / "usr/lib/pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "gdrpeer"], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    p = subprocess.run(["c++", str(src), "-o", str(tmp_path / "probe"), *flags], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert subprocess.run([str(tmp_path / "probe")]).returncode == 0


def test_systemd_units_verify(installed):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    unit_dir = installed / "etc/systemd/system"
    # The units name /usr/bin/gdrpeer; point it at the installed one for the check.
    for unit in ("gdrpeer-check.service", "gdrpeer-check.timer"):
        text = (unit_dir / unit).read_text().replace("/usr/bin/gdrpeer", str(installed / "usr/bin/gdrpeer"))
        (unit_dir / unit).write_text(text)
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit_dir / "gdrpeer-check.service"),
                        str(unit_dir / "gdrpeer-check.timer")], capture_output=True, text=True,
                       env=dict(os.environ, SYSTEMD_UNIT_PATH=f"{unit_dir}:"))
    assert p.returncode == 0, p.stdout + p.stderr


def help_options(sub):
    """Options `gdrpeer [sub] --help` lists: CLI11's "Options:" section, names first on each line."""
    p = run(gdrpeer_bin(), *([sub] if sub else []), "--help")
    assert p.returncode == 0, p.stderr
    opts, section = set(), None
    for line in p.stdout.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
        elif section == "Options" and re.match(r"^  -", line):
            opts.update(line.split()[0].split(","))
    return opts


def man_options(page):
    """Options a man page documents: the .TP items of its OPTIONS section."""
    text = (REPO / "packaging" / "man" / page).read_text()
    section = text.split(".SH OPTIONS", 1)[1].split("\n.SH ", 1)[0]
    opts = set()
    for item in re.findall(r"\.TP\n(.*)\n", section):
        # e.g. `.BR \-j ", " \-\-jobs " \fIN\fR"`: every name of the option, not its argument
        item = re.sub(r"\\f[BIR]", " ", item.replace("\\-", "-").replace('"', " "))
        opts.update(re.findall(r"(?:^|\s)(--?[A-Za-z][\w-]*)", item))
    return opts


@pytest.mark.parametrize("sub", [None, *SUBCOMMANDS], ids=lambda s: s or "gdrpeer")
def test_man_page_matches_help(sub):
    want = help_options(sub)
    assert "--help" in want and len(want) >= 2, want
    page = f"gdrpeer-{sub}.1" if sub else "gdrpeer.1"
    got = man_options(page)
    assert got == want, f"{page}: missing {sorted(want - got)}, not in --help {sorted(got - want)}"


def complete(words):
    """COMPREPLY of the installed-style completion for a command line ending in words[-1]."""
    script = (f"source /usr/share/bash-completion/bash_completion\n"
              f"source {REPO}/packaging/bash-completion/gdrpeer\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
              f"COMP_LINE={' '.join(words)!r}; COMP_POINT=${{#COMP_LINE}}\n"
              "_gdrpeer; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return set(p.stdout.split())


def test_bash_completion():
    if not Path("/usr/share/bash-completion/bash_completion").exists():
        pytest.fail("bash-completion is missing: install the Debian package bash-completion (make deps)")
    assert complete(["gdrpeer", ""]) >= set(SUBCOMMANDS)
    assert complete(["gdrpeer", "--"]) == help_options(None) - {"-h", "-V"}
    for sub in SUBCOMMANDS:
        assert complete(["gdrpeer", sub, "-"]) == help_options(sub), sub
    assert complete(["gdrpeer", "check", "--format", ""]) == {"text", "json", "dot", "prometheus", "nfd", "reason", "summary"}
