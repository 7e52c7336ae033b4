"""The lock that keeps a data directory to one server (the sqlite backend keeps its journals there)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from arena.errors import DataDirLocked

LOCK_NAME = ".arena.lock"


class DataDirLock:
    """An exclusive flock on ``data_dir/.arena.lock`` held for the life of `arena serve`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._fd: int | None = None

    def acquire(self) -> None:
        """Create the directory if needed and lock it. Raises DataDirLocked, OSError."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise DataDirLocked(f"{self.data_dir} is in use by another arena serve (lock {LOCK_NAME})") from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
