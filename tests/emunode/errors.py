"""Errors of the emulated node: each carries a one-line message meant for the user."""


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
