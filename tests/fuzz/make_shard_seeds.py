#!/usr/bin/env python3
"""Writes the seed corpus of shard_fuzzer (tests/fuzz/corpus/shard): small valid
datasets in the format of workloads/shard_format.h, each wrapped in the fuzzer's
input layout (flags byte, u32 index length, index, shard-00000). Run it again
only if the format changes; the seeds are committed."""
import os
import struct

POLY = 0x82F63B78  # CRC32C (Castagnoli), reflected
TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def dataset(payloads):
    shard = b"FTSHARD\0" + struct.pack("<II", 1, 0)
    entries = b""
    for p in payloads:
        offset = len(shard)
        crc = crc32c(p)
        shard += struct.pack("<II", len(p), crc) + p
        entries += struct.pack("<IIQII", 0, len(p), offset, crc, 0)
    max_len = max(len(p) for p in payloads)
    index = b"FTINDEX\0" + struct.pack("<IIQQ", 1, 1, len(payloads), max_len) + entries
    index += struct.pack("<I", crc32c(index))
    return index, shard


def wrap(flags, index, shard):
    return bytes([flags]) + struct.pack("<I", len(index)) + index + shard


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "shard")
    os.makedirs(out, exist_ok=True)
    cases = {
        "one-record": [b"hello, shard"],
        "three-records": [bytes(range(40)), b"", bytes([7]) * 100],
        "varied-sizes": [bytes([i % 251]) * (i * 13 % 300) for i in range(1, 12)],
    }
    for name, payloads in cases.items():
        index, shard = dataset(payloads)
        for flags, suffix in ((0, "pread"), (2, "mmap"), (1, "fixcrc")):
            with open(os.path.join(out, f"{name}-{suffix}.bin"), "wb") as f:
                f.write(wrap(flags, index, shard))
    index, shard = dataset([b"x" * 64, b"y" * 64])
    with open(os.path.join(out, "truncated-shard.bin"), "wb") as f:
        f.write(wrap(0, index, shard[:-20]))
    with open(os.path.join(out, "missing-shard.bin"), "wb") as f:
        f.write(wrap(4, index, shard))


if __name__ == "__main__":
    main()
