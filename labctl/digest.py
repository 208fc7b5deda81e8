"""The sha256 of a file (of its first ``limit`` bytes when given), read in 1 MiB chunks: the one helper
behind a build's binary hash (``lab/builds.py``), the appliance's and the guest image's cache checks, and a
user's image identity and its never-written check (``profile/userimage.py``)."""

from __future__ import annotations

import hashlib
import os

CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike[str], limit: int | None = None) -> str:
    digest = hashlib.sha256()
    left = limit
    with open(path, "rb") as f:
        while left is None or left > 0:
            chunk = f.read(CHUNK if left is None else min(CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            if left is not None:
                left -= len(chunk)
    return digest.hexdigest()
