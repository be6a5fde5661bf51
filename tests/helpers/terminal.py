"""Run a command on a pseudo-terminal (what a user at a terminal sees: stdout and stderr together)."""
from __future__ import annotations

import os
import pty
import subprocess


def run_on_terminal(argv, env=None, cwd=None, timeout=300) -> tuple[int, str]:
    """(exit code, everything the command wrote to the terminal, with "\\r\\n" as "\\n")."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True)
    finally:
        os.close(slave)
    out = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:              # EIO: the command and its children closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    rc = p.wait(timeout)
    return rc, out.decode(errors="replace").replace("\r\n", "\n")
