"""The appliance's ELF kernel: found in a bzImage by its boot protocol header, unpacked (xz, gzip), and
taken only when it carries a PVH entry note; otherwise the bzImage is booted as it is."""

from __future__ import annotations

import gzip
import lzma
import struct

import pytest

from labctl.lab.libvirt.appliance.pvh import PVH_NOTE_TYPE, decompress, elf_kernel, has_pvh_entry, payload


def note(name: bytes, note_type: int, desc: bytes) -> bytes:
    def pad(data: bytes) -> bytes:
        return data + b"\0" * (-len(data) % 4)

    return struct.pack("<III", len(name), len(desc), note_type) + pad(name) + pad(desc)


def elf(notes: bytes) -> bytes:
    """A 64-bit little-endian ELF with one PT_NOTE segment holding ``notes``."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)  # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 1)  # e_phentsize, e_phnum
    phdr = struct.pack("<IIQQQQQQ", 4, 0, 64 + 56, 0, 0, len(notes), len(notes), 4)
    return bytes(header) + phdr + notes


PVH_ELF = elf(note(b"Xen\0", 6, b"linux\0") + note(b"Xen\0", PVH_NOTE_TYPE, struct.pack("<I", 0x1000000)))
BARE_ELF = elf(note(b"GNU\0", 3, b"\x01" * 20))


def bzimage(compressed: bytes, version: int = 0x020F, setup_sects: int = 3) -> bytes:
    """A bzImage as the boot protocol lays it out: setup sectors with the header, then the protected-mode
    code, whose ``payload_offset`` bytes in is the compressed kernel."""
    setup = bytearray((setup_sects + 1) * 512)
    setup[0x1F1] = setup_sects
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, version)
    decompressor = b"\x90" * 100  # the protected-mode code before the payload
    struct.pack_into("<II", setup, 0x248, len(decompressor), len(compressed))
    return bytes(setup) + decompressor + compressed + b"\0" * 16


@pytest.mark.parametrize("pack", [lambda d: lzma.compress(d, format=lzma.FORMAT_XZ), gzip.compress],
                         ids=["xz", "gzip"])
def test_the_elf_with_a_pvh_note_comes_out_of_the_bzimage(pack):
    image = bzimage(pack(PVH_ELF))
    assert payload(image) == pack(PVH_ELF)
    assert elf_kernel(image) == PVH_ELF


def test_an_elf_without_the_pvh_note_is_not_taken():
    assert has_pvh_entry(PVH_ELF) and not has_pvh_entry(BARE_ELF)
    assert elf_kernel(bzimage(lzma.compress(BARE_ELF, format=lzma.FORMAT_XZ))) is None


def test_what_it_cannot_read_leaves_the_bzimage_as_it_is():
    packed = lzma.compress(PVH_ELF, format=lzma.FORMAT_XZ)
    assert elf_kernel(bzimage(packed, version=0x0207)) is None  # before payload_offset existed
    assert elf_kernel(bzimage(packed)[:600]) is None  # the payload runs past the file's end
    assert elf_kernel(b"MZ" + b"\0" * 1000) is None  # not a bzImage
    assert decompress(b"\x28\xb5\x2f\xfd" + b"\0" * 20) is None  # zstd: not unpacked here
    assert decompress(b"\xfd7zXZ\x00" + b"\0" * 20) is None  # a damaged xz stream
    assert elf_kernel(bzimage(gzip.compress(b"not an elf" * 10))) is None
