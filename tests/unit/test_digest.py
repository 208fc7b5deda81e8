"""labctl.digest.sha256_file: the whole file, or its first ``limit`` bytes, across chunk boundaries."""

from __future__ import annotations

import hashlib

from labctl.digest import CHUNK, sha256_file


def test_whole_file_and_prefix_match_hashlib(tmp_path):
    data = bytes(range(256)) * ((2 * CHUNK + 1000) // 256)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    for limit in (0, 10, CHUNK, CHUNK + 7, len(data) + 5):
        assert sha256_file(str(path), limit) == hashlib.sha256(data[:limit]).hexdigest(), limit

