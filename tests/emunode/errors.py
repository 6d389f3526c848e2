"""Errors of the emulated node: each carries a one-line message meant for the user."""

import subprocess


class HarnessError(Exception):
    """Bad input or a broken environment: unknown topology or kernel, missing QEMU, a failed
    download. The message is one line and names the problem."""


class GuestError(HarnessError):
    """The guest did not finish its command list: it panicked, hung, or never booted.

    `log` holds the guest's console output so a test failure shows what happened."""

    def __init__(self, message, log=""):
        super().__init__(message)
        self.log = log

    def __str__(self):
        tail = "\n".join(self.log.splitlines()[-60:])
        return f"{self.args[0]}\n--- last lines of the guest console ---\n{tail}"


def run_checked(argv, what, cwd=None, error=HarnessError):
    """Run a host tool; its stdout, or `error` naming `what` with the tool's last 25 lines."""
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-25:])
        raise error(f"{what} failed (exit {p.returncode}):\n{tail}")
    return p.stdout
