#!/usr/bin/python3
"""Flip the sign of every fp16 weight of a safetensors file, in place: the
same names, shapes and sizes, other weights (test/crash/xid_reuse.sh and
test/weight_cache/run.sh need a second model exactly like the first).

    tools/flip_fp16_signs.py model.safetensors
"""
import struct
import sys

p = sys.argv[1]
d = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", d[:8])[0]
for i in range(8 + n + 1, len(d), 2):   # the high byte of each little-endian fp16
    d[i] ^= 0x80
open(p, "wb").write(d)
