"""The Debian packages on a clean bookworm (docs/fleet.md, "Debian packages"): `make deb` builds
gdrpeer and gdrpeer-dkms (lintian included; cached by the content of the tree), a fresh
debootstrap of bookworm gets the packages' own dependencies and the guest kernel's
linux-headers package from apt, then apt installs both packages, whose maintainer scripts
build gdrpeer.ko there through DKMS. In that chroot the packaged `gdrpeer` reports its installed
rule data and checks a reference input like the source tree does; the emulated node boots with
the gdrpeer.ko DKMS built in the chroot, the modprobe.d file and udev rule the package installed,
and `modprobe gdrpeer` loads it; `dpkg --purge` of both leaves the chroot as it found it.

Slow (2.5 minutes with the packages, base system and downloads cached; 9 to 11 minutes cold on
2 cores): `make test-packages` runs it, `make test` skips it. Needs root (debootstrap, chroot, a
private mount namespace for /proc).
"""

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import vm_kernel
from emunode import kernels
from emunode.paths import build_dir, cache_dir
from helpers.check_cli import gdrpeer_bin
from helpers.dkms_guest import boot_and_modprobe
from helpers.paths import REF, REPO

SUITE = "bookworm"
# Who the test build names as Maintainer (make deb's DEBFULLNAME, DEBEMAIL; debian/README.source).
PACKAGER = ("gdrpeer package test", "package-test@gdrpeer.invalid")
INPUT = REF / "stelline-asus-esc8000a-e12.md"
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = pytest.mark.skipif(
    os.environ.get("GDRPEER_PACKAGE_TESTS") != "1",
    reason="the package build and the clean-chroot install take 2.5 (cached) to 11 minutes (cold): "
           "`make test-packages` runs them")


def sh(cmd, timeout=3600, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))}: rc={p.returncode}\n{p.stdout[-6000:]}{p.stderr[-6000:]}"
    return p.stdout


# ---- the packages, built once per content of the tree ---------------------------------------

def tree_key():
    """Hash of what `make deb` packages: who the build names as Maintainer, and the tracked and new
    files (git ls-files -co) by content, but for the Python tests and CI script, which no package
    build reads (editing this test does not rebuild the packages)."""
    names = sh(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard", "-z"]).split("\0")
    h = hashlib.sha256("\0".join(PACKAGER).encode())
    for name in sorted(n for n in names if n and not n.startswith(("tests/", ".ci/"))):
        path = REPO / name
        if path.is_file():  # (a file deleted but not yet committed is listed, and not packaged)
            h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def built_debs():
    """{package: .deb path} from build/cache/debs/<tree key>, running `make deb` when absent."""
    key = tree_key()
    cached = cache_dir() / "debs" / key
    if not cached.is_dir():
        build = build_dir() / "packages"
        sh(["nice", "make", "-s", "-C", REPO, "deb", f"BUILD={build}"], timeout=3 * 3600,
           env=dict(os.environ, DEBFULLNAME=PACKAGER[0], DEBEMAIL=PACKAGER[1]))
        assert tree_key() == key, "the tree changed while its packages were built: run the test again"
        stage = cached.with_name(cached.name + ".new")
        shutil.rmtree(stage, ignore_errors=True)  # (an interrupted copy of this same key)
        stage.mkdir(parents=True)
        for f in (build / "deb").iterdir():  # (not the -dbgsym package: most of the size, unused)
            if f.suffix in (".deb", ".changes", ".buildinfo") and "-dbgsym_" not in f.name:
                shutil.copy2(f, stage / f.name)
        stage.rename(cached)
    debs = {f.name.split("_")[0]: f for f in cached.glob("*.deb")}
    assert set(debs) >= {"gdrpeer", "gdrpeer-dkms"}, f"{cached}: {sorted(debs)}"
    return debs


# ---- a clean bookworm ------------------------------------------------------------------------

def base_tarball():
    """debootstrap --variant=minbase of bookworm from the mirror tests/emunode fetches kernels from,
    made once and kept as a tarball keyed by suite and mirror."""
    mirror = kernels.MIRROR
    key = hashlib.sha256(f"{SUITE} {mirror}".encode()).hexdigest()[:12]
    tarball = cache_dir() / "debootstrap" / f"{SUITE}-minbase-{key}.tar.zst"
    if not tarball.exists():
        if not shutil.which("debootstrap"):
            pytest.fail("debootstrap is missing: install the Debian package debootstrap (make deps)")
        work = build_dir() / "debootstrap" / SUITE
        shutil.rmtree(work, ignore_errors=True)
        work.parent.mkdir(parents=True, exist_ok=True)
        sh(["nice", "debootstrap", "--variant=minbase", SUITE, work, mirror])
        tarball.parent.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_name(tarball.name + ".new")
        sh(["tar", "--numeric-owner", "--xattrs", "-I", "zstd", "-C", work, "-cf", partial, "."])
        partial.rename(tarball)
        shutil.rmtree(work)
    return tarball


class Chroot:
    """A bookworm unpacked in `root`; each command runs in a private mount namespace with /proc
    mounted (DKMS and the kernel's objtool read it) and apt's download folder on a cache shared
    by later runs, so no mount outlives the command."""

    def __init__(self, root):
        self.root = root
        self.archives = cache_dir() / "apt" / f"{SUITE}-chroot-archives"
        (self.archives / "partial").mkdir(parents=True, exist_ok=True)

    def run(self, *cmd, check=True):
        script = ('mount -t proc proc "$0/proc" && mount --bind "$1" "$0/var/cache/apt/archives" && '
                  'shift && exec chroot "$0" "$@"')
        env = {"PATH": PATH, "LC_ALL": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive", "HOME": "/root"}
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                            str(self.root), str(self.archives), *map(str, cmd)], capture_output=True,
                           text=True, timeout=3600, env=env)
        if check:
            assert p.returncode == 0, f"in the chroot: {' '.join(map(str, cmd))}: rc={p.returncode}\n" \
                                      f"{p.stdout[-8000:]}{p.stderr[-8000:]}"
        return p

    def apt(self, *args):
        # The mirror's Release files may be older than their Valid-Until on a machine whose clock
        # is ahead, as tests/emunode's own apt calls allow for.
        return self.run("apt-get", "-q", "-y", "-o", "Acquire::Check-Valid-Until=false",
                        "-o", "Acquire::Retries=3", *args).stdout


# Paths dpkg and apt rewrite for any package operation: their own bookkeeping, not the package's.
BOOKKEEPING = re.compile(r"^(tmp|proc|var/log|var/cache/apt|var/lib/apt|var/cache/debconf|"
                         r"var/lib/dpkg/(status|status-old|available|available-old|lock.*|triggers/.*|"
                         r"diversions-old|statoverride-old))(/|$)")


def snapshot(root):
    """{path: (type, content hash or link target, mode, owner)} of every path below root,
    dpkg's and apt's bookkeeping left out."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if BOOKKEEPING.match(rel):
                continue
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                what = hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what = os.readlink(path)
            else:
                what = ""
            out[rel] = (stat.S_IFMT(st.st_mode), what, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The chroot with both packages installed; {root, chroot, kernel, before, install log}."""
    if os.geteuid() != 0:
        pytest.fail("the clean-chroot install needs root (debootstrap, chroot, mount namespace)")
    if vm_kernel() != "6.1":
        pytest.skip(f"the chroot is bookworm, whose kernel is 6.1; VM_KERNEL is {vm_kernel()}")
    debs = built_debs()
    kernel = kernels.ensure_kernel(vm_kernel())
    root = tmp_path_factory.mktemp("bookworm") / "root"
    root.mkdir()
    sh(["tar", "--numeric-owner", "--xattrs", "-I", "zstd", "-C", root, "-xf", base_tarball()])
    chroot = Chroot(root)
    # The guest kernel comes from bookworm-security: the same sources tests/emunode fetches it from.
    (root / "etc/apt/sources.list").write_text("\n".join(kernels.SUITES["6.1"][1]) + "\n")
    chroot.apt("update")
    # The packages' own Depends (shlibs and misc substituted at build time), exactly as built,
    # and the headers a node running the guest kernel has: DKMS builds against them.
    fields = [sh(["dpkg-deb", "-f", debs[p], "Depends"]).strip() for p in ("gdrpeer", "gdrpeer-dkms")]
    chroot.apt("satisfy", "--no-install-recommends", *fields, f"linux-headers-{kernel.release}")
    before = snapshot(root)
    groups = {f: (root / "etc" / f).read_text() for f in ("group", "gshadow")}
    for name, deb in debs.items():
        shutil.copy2(deb, root / "tmp" / deb.name)
    log = chroot.apt("install", "--no-install-recommends",
                     *(f"/tmp/{debs[p].name}" for p in ("gdrpeer", "gdrpeer-dkms")))
    yield {"root": root, "chroot": chroot, "kernel": kernel, "before": before, "groups": groups, "log": log,
           "debs": debs}
    shutil.rmtree(root.parent)


def test_apt_installs_both_and_dkms_builds_for_the_guest_kernel(installed):
    chroot, kernel = installed["chroot"], installed["kernel"]
    status = chroot.run("dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\\n",
                        "gdrpeer", "gdrpeer-dkms").stdout
    assert status.split("\n")[:2] == ["gdrpeer ii ", "gdrpeer-dkms ii "], status
    for deb in installed["debs"].values():
        assert sh(["dpkg-deb", "-f", deb, "Maintainer"]).strip() == f"{PACKAGER[0]} <{PACKAGER[1]}>", deb
    version = re.search(r'^PACKAGE_VERSION="(.*)"', (REPO / "dkms.conf").read_text(), re.M).group(1)
    dkms = chroot.run("dkms", "status", "-m", "gdrpeer").stdout.strip()
    assert f"gdrpeer/{version}, {kernel.release}, x86_64: installed" in dkms.splitlines(), \
        f"{dkms}\n--- apt install ---\n{installed['log'][-6000:]}"
    ko = installed["root"] / "lib/modules" / kernel.release / "updates/dkms/gdrpeer.ko"
    assert ko.is_file(), installed["log"][-6000:]
    vermagic = chroot.run("modinfo", "-F", "vermagic", f"/lib/modules/{kernel.release}/updates/dkms/gdrpeer.ko")
    assert vermagic.stdout.split()[0] == kernel.release, vermagic.stdout
    # The package's configure step made the group the udev rule hands /dev/gdrpeer to.
    assert chroot.run("getent", "group", "gdrpeer").stdout.startswith("gdrpeer:x:")


def test_packaged_cli_checks_with_installed_data(installed):
    chroot, root = installed["chroot"], installed["root"]
    v = chroot.run("gdrpeer", "--version").stdout
    assert re.match(r"gdrpeer \d+\.\d+\.\d+\n", v) and "rule data: /usr/share/gdrpeer/topology\n" in v, v
    shutil.copy2(INPUT, root / "tmp" / INPUT.name)
    packaged = chroot.run("gdrpeer", "check", "--json", f"/tmp/{INPUT.name}", check=False)
    env = dict(os.environ, GDRPEER_DATA_DIR=str(REPO / "topology"))
    tree = subprocess.run([gdrpeer_bin(), "check", "--json", str(INPUT)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert packaged.returncode == tree.returncode and packaged.returncode in (0, 1, 2), packaged.stderr
    got, want = json.loads(packaged.stdout), json.loads(tree.stdout)
    assert got["pairs"], "no pairs checked: the comparison proves nothing"
    assert got["node"].pop("source") == f"/tmp/{INPUT.name}" and want["node"].pop("source") == str(INPUT)
    assert got == want
    # The man page and completion are where man and bash-completion look.
    for path in ("usr/share/man/man1/gdrpeer-check.1.gz", "usr/share/bash-completion/completions/gdrpeer"):
        assert (root / path).is_file(), path


def test_dkms_module_from_the_chroot_loads_in_the_guest(installed, tmp_path, node_factory):
    """The gdrpeer.ko gdrpeer-dkms built, with the modprobe.d file and udev rule the package installed."""
    root, kernel = installed["root"], installed["kernel"]
    ko = root / "lib/modules" / kernel.release / "updates/dkms/gdrpeer.ko"
    boot_and_modprobe(node_factory, kernel, ko, tmp_path, shipped={
        "modprobe": root / "etc/modprobe.d/gdrpeer.conf", "udev": root / "usr/lib/udev/rules.d/70-gdrpeer.rules",
        "sysusers": root / "usr/lib/sysusers.d/gdrpeer.conf"})


def changes_since_install(installed):
    """Paths that differ from the snapshot taken before the install, but for two allowed ones:
    the gdrpeer system group, the only line added to /etc/group and /etc/gshadow (kept on purpose:
    Debian's AccountHandlingInMaintainerScripts, files may still carry its gid), and depmod's index
    files of the kernel when they name no gdrpeer module (DKMS reruns depmod when it installs and
    removes; a node has them anyway, from its kernel image, which is not installed here)."""
    root, kernel = installed["root"], installed["kernel"]
    before, after = dict(installed["before"]), snapshot(root)
    for name, old in installed["groups"].items():
        new = (root / "etc" / name).read_text()
        added = set(new.splitlines()) - set(old.splitlines())
        assert set(old.splitlines()) <= set(new.splitlines()) and [a.split(":")[0] for a in added] == ["gdrpeer"], \
            f"/etc/{name}: {added}"
        for rel in (f"etc/{name}", f"etc/{name}-"):
            after.pop(rel, None)
            before.pop(rel, None)
    moddir = f"{(root / 'lib/modules').resolve().relative_to(root)}/{kernel.release}/"  # (usr/lib: merged /usr)
    for rel in sorted(set(after) - set(before)):
        if rel.startswith(moddir + "modules."):
            assert b"gdrpeer" not in (root / rel).read_bytes(), rel
            del after[rel]
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def test_remove_then_purge_leaves_nothing(installed):
    """Last: `dpkg -r` keeps only the conffile (the node's module options), `dpkg --purge` removes
    that too; then the chroot is what it was before the install."""
    chroot, root = installed["chroot"], installed["root"]
    for deb in root.glob("tmp/*.deb"):
        deb.unlink()
    chroot.run("dpkg", "-r", "gdrpeer", "gdrpeer-dkms")
    # (and dpkg's record of the removed-but-configured packages, which the purge must then drop)
    kept = [p for p in changes_since_install(installed) if not p.startswith("var/lib/dpkg/info/gdrpeer")]
    assert kept == ["etc/modprobe.d/gdrpeer.conf"]
    status = chroot.run("dpkg-query", "-W", "-f", "${db:Status-Abbrev}\n", "gdrpeer", "gdrpeer-dkms").stdout
    # gdrpeer keeps its conffile ("rc"); gdrpeer-dkms has none, so dpkg forgets it at once
    assert status.split() == ["rc", "un"], status
    chroot.run("dpkg", "--purge", "gdrpeer", "gdrpeer-dkms")
    changed = changes_since_install(installed)
    assert changed == [], f"the purge left these different from before the install: {changed[:40]}"
    left = [p for p in snapshot(root) if "gdrpeer" in p]
    assert left == [], left
