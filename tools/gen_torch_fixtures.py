#!/usr/bin/python3
"""Regenerate the PyTorch checkpoint fixtures of test/unit/test_torch.c
(make fixtures), and the seeds of the two torch fuzzers.

Writes to test/fixtures/torch/:
- checkpoints torch.save wrote (fp32, fp16, bf16, other dtypes, an
  nn.Module's state dict with _metadata, tied weights, views with a
  storage offset, nn.Parameters, pickle protocols 1 and 4, a training
  checkpoint with the state dict under "state_dict" or "model", the legacy
  format of _use_new_zipfile_serialization=False, and a legacy file with
  storage views as torch < 1.6 could write them), and a ZIP64 rewrite of
  one;
- files the reader must refuse: a non-contiguous view, a deflated entry,
  hostile pickles (os.system, builtins.eval, subprocess.Popen,
  builtins.getattr, in a torch-like ZIP and in the legacy format), a whole
  nn.Module, a list, a non-tensor value, and damaged archives;
- expected.txt, what test_torch.c checks (one record a line, fields
  separated by single spaces; names have no spaces):
    file NAME NTENSORS
    tensor NAME DTYPE NDIM DIM... CRC32     (of the tensor's bytes, hex)
    same NAME NAME                          (one storage, one offset)
    error NAME MESSAGE                      (a substring of the error)

The hostile pickles are written with pickle and never loaded: their
__reduce__ would run `touch /tmp/tf_torch_pwned`, and test_torch.c checks
that no such file appears.  Everything else is loaded back with torch.load
to compute the expectations (files this script just wrote).

Run with Debian's interpreter: /usr/bin/python3 tools/gen_torch_fixtures.py
"""
import collections
import io
import os
import pickle
import pickletools
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
import zlib

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "test", "fixtures", "torch")
SEEDS_ZIP = os.path.join(ROOT, "test", "fuzz", "seeds_torch_zip")
SEEDS_PICKLE = os.path.join(ROOT, "test", "fuzz", "seeds_torch_pickle")
MARKER = "/tmp/tf_torch_pwned"

DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
    torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}
SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

expected = []


def path(name):
    return os.path.join(OUT, name)


def tensor_bytes(t):
    t = t.detach().contiguous()
    return t.view(SAME_SIZE_INT[t.element_size()]).numpy().tobytes()


def expect_ok(name, same=()):
    """Load what we wrote and record every tensor of its state dict."""
    sd = torch.load(path(name))
    if "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    elif "model" in sd and isinstance(sd["model"], dict):
        sd = sd["model"]
    expected.append(f"file {name} {len(sd)}")
    for key, t in sd.items():
        assert " " not in key
        dims = " ".join(str(d) for d in t.shape)
        crc = zlib.crc32(tensor_bytes(t))
        expected.append(f"tensor {key} {DTYPES[t.dtype]} {t.dim()}{' ' if dims else ''}{dims} {crc:08x}")
    for a, b in same:
        expected.append(f"same {a} {b}")


def expect_error(name, message):
    expected.append(f"error {name} {message}")


def save(name, obj, **kw):
    torch.save(obj, path(name), **kw)


# ---- ZIP archives written by hand ----

def zip_entries(name):
    """(name, bytes) of every entry of a ZIP, in directory order."""
    with zipfile.ZipFile(path(name)) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def build_zip(entries, zip64=False, flags=0, disk=0):
    """A ZIP of stored entries; with zip64, every size and offset in ZIP64
    extra fields and the ZIP64 end of central directory record."""
    out = bytearray()
    cd = bytearray()
    for name, data in entries:
        nb = name.encode()
        crc = zlib.crc32(data)
        off = len(out)
        if zip64:
            lx = struct.pack("<HHQQ", 1, 16, len(data), len(data))
            out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, flags, 0, 0, 0, crc,
                               0xFFFFFFFF, 0xFFFFFFFF, len(nb), len(lx)) + nb + lx + data
            cx = struct.pack("<HHQQQ", 1, 24, len(data), len(data), off)
            cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, flags, 0, 0, 0, crc,
                              0xFFFFFFFF, 0xFFFFFFFF, len(nb), len(cx), 0, 0, 0, 0,
                              0xFFFFFFFF) + nb + cx
        else:
            out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, flags, 0, 0, 0, crc,
                               len(data), len(data), len(nb), 0) + nb + data
            cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, flags, 0, 0, 0, crc,
                              len(data), len(data), len(nb), 0, 0, 0, 0, 0, off) + nb
    cd_off = len(out)
    out += cd
    n = len(entries)
    if zip64:
        rec = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(cd), cd_off)
        out += struct.pack("<IIQI", 0x07064B50, 0, rec, 1)
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF,
                           0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, disk, disk, n, n, len(cd), cd_off, 0)
    return bytes(out)


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


def renamed(entries, old, new):
    return [(n.replace(old, new, 1), d) for n, d in entries]


# ---- hostile objects: pickled, never unpickled ----

class System:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


class Eval:
    def __reduce__(self):
        return (eval, ("__import__('os').system('touch %s')" % MARKER,))


class Popen:
    def __reduce__(self):
        return (subprocess.Popen, (["touch", MARKER],))


class Import:
    def __reduce__(self):
        return (__import__, ("os",))


class GetAttr:
    def __reduce__(self):
        return (getattr, (Import(), "system"))


def hostile_zip(name, obj, protocol):
    data = pickle.dumps(collections.OrderedDict([("weight", obj)]), protocol=protocol)
    prefix = name[:-3]
    write(name, build_zip([(prefix + "/data.pkl", data), (prefix + "/version", b"3\n")]))


# ---- legacy files with storage views (torch < 1.6 could write them) ----

class StorageRef:
    def __init__(self, pid):
        self.pid = pid


class Rebuild:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


def legacy_with_views(name):
    """Storage "10" of 8 floats; view "11" is its elements 2..7, view "12"
    its elements 4..5; tensors on the root and on both views."""
    root = torch.arange(8, dtype=torch.float32) * 1.5
    view1 = ("storage", torch.FloatStorage, "10", "cpu", 8, ("11", 2, 6))
    view2 = ("storage", torch.FloatStorage, "10", "cpu", 8, ("12", 4, 2))
    whole = ("storage", torch.FloatStorage, "10", "cpu", 8, None)
    sd = collections.OrderedDict([
        ("all", Rebuild(StorageRef(whole), 0, (2, 4), (4, 1))),
        ("tail", Rebuild(StorageRef(view1), 1, (5,), (1,))),
        ("pair", Rebuild(StorageRef(view2), 0, (2, 1), (1, 1))),
    ])
    f = io.BytesIO()
    for obj in (0x1950A86A20F9469CFC6C, 1001,
                dict(protocol_version=1001, little_endian=True, type_sizes=dict(short=2, int=4, long=4))):
        pickle.dump(obj, f, protocol=2)
    p = pickle.Pickler(f, protocol=2)
    p.persistent_id = lambda o: o.pid if isinstance(o, StorageRef) else None
    p.dump(sd)
    pickle.dump(["10"], f, protocol=2)
    f.write(struct.pack("<q", 8) + root.numpy().tobytes())
    write(name, f.getvalue())


def legacy_pickles(data):
    """Byte ranges of the five pickles of a legacy file (pickletools reads,
    never runs, them)."""
    f = io.BytesIO(data)
    ranges = []
    for _ in range(5):
        start = f.tell()
        for _op in pickletools.genops(f):
            pass
        ranges.append((start, f.tell()))
    return ranges


def main():
    torch.manual_seed(0)
    if os.path.exists(MARKER):
        os.unlink(MARKER)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)

    # dtypes; a scalar and an empty tensor among them
    for name, dtype in (("f32.pt", torch.float32), ("f16.pt", torch.float16), ("bf16.pt", torch.bfloat16)):
        save(name, collections.OrderedDict([
            ("weight", torch.randn(4, 3).to(dtype)),
            ("bias", torch.randn(4).to(dtype)),
            ("scalar", torch.tensor(2.5, dtype=dtype)),
            ("cube", torch.randn(2, 3, 4).to(dtype)),
            ("empty", torch.zeros(0, 3, dtype=dtype)),
        ]))
        expect_ok(name)
    save("dtypes.pt", {
        "q": torch.randint(-128, 127, (2, 5), dtype=torch.int8),
        "ids": torch.arange(5, dtype=torch.int64),
        "mask": torch.tensor([True, False, True]),
        "d": torch.randn(3, dtype=torch.float64),
        "i32": torch.arange(4, dtype=torch.int32),
        "u8": torch.arange(6, dtype=torch.uint8),
        "i16": torch.arange(3, dtype=torch.int16),
    })
    expect_ok("dtypes.pt")

    # a module's state dict: OrderedDict with _metadata (BUILD)
    m = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 3), torch.nn.LayerNorm(3),
                            torch.nn.BatchNorm1d(3))
    save("module.pt", m.state_dict())
    expect_ok("module.pt")

    # tied weights: one tensor under two names, and a second tensor object on the same storage
    emb = torch.randn(5, 4)
    save("tied.pt", {"enc.embed": emb, "dec.embed": emb, "out.weight": emb.detach(), "other": torch.randn(2)})
    expect_ok("tied.pt", same=(("enc.embed", "dec.embed"), ("enc.embed", "out.weight")))

    # contiguous views with a storage offset
    base = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    save("views.pt", {"full": base, "rows": base[1:], "row2": base[2], "one": base[3, 1:2],
                      "col1": base[1:2, :]})
    expect_ok("views.pt")

    # nn.Parameter: _rebuild_parameter
    save("param.pt", {"p": torch.nn.Parameter(torch.randn(3)),
                      "q": torch.nn.Parameter(torch.randn(2, 2).half(), requires_grad=False)})
    expect_ok("param.pt")

    # other pickle protocols: 1 (INT for bools), 4 (FRAME, STACK_GLOBAL, MEMOIZE)
    save("proto1.pt", m.state_dict(), pickle_protocol=1)
    expect_ok("proto1.pt")
    save("proto4.pt", m.state_dict(), pickle_protocol=4)
    expect_ok("proto4.pt")

    # training checkpoints
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    m(torch.tensor([1, 2])).sum().backward()
    opt.step()
    save("train.pt", {"epoch": 3, "state_dict": m.state_dict(), "optimizer": opt.state_dict(),
                      "best": 0.25, "name": "run", "args": None})
    expect_ok("train.pt")
    save("model_key.pt", {"model": {"w": torch.randn(2, 2)}, "lr": [0.1, 0.01]})
    expect_ok("model_key.pt")

    # the legacy format
    save("legacy.pt", collections.OrderedDict([
        ("emb", emb), ("tied", emb), ("rows", base[1:]), ("h", torch.randn(3).half()),
        ("b", torch.randn(2).bfloat16())]), _use_new_zipfile_serialization=False)
    expect_ok("legacy.pt", same=(("emb", "tied"),))
    legacy_with_views("legacy_view.pt")
    expect_ok("legacy_view.pt")

    # ZIP64
    write("zip64.pt", build_zip(renamed(zip_entries("f32.pt"), "f32/", "zip64/"), zip64=True))
    expect_ok("zip64.pt")

    # refused: a non-contiguous view
    save("noncontig.pt", {"w_t": torch.randn(2, 3).t()})
    expect_error("noncontig.pt", 'tensor "w_t" is a non-contiguous view (stride (1, 3) of shape (3, 2));'
                 ' save it with .contiguous()')
    save("noncontig_step.pt", {"ok": torch.randn(2), "every_other": torch.randn(6)[::2]})
    expect_error("noncontig_step.pt", 'tensor "every_other" is a non-contiguous view (stride (2,) of shape (3,))')

    # refused: a deflated entry
    with zipfile.ZipFile(path("deflated.pt"), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in renamed(zip_entries("f32.pt"), "f32/", "deflated/"):
            z.writestr(n, d)
    expect_error("deflated.pt", 'entry "deflated/data.pkl" is compressed (method 8); only stored entries are supported')

    # refused: hostile pickles (never loaded)
    hostile_zip("hostile_system.pt", System(), 2)
    expect_error("hostile_system.pt", 'pickle names the global "posix.system", which a state dict never needs; refused')
    hostile_zip("hostile_eval.pt", Eval(), 2)
    expect_error("hostile_eval.pt", 'pickle names the global "__builtin__.eval", which a state dict never needs; refused')
    hostile_zip("hostile_eval4.pt", Eval(), 4)
    expect_error("hostile_eval4.pt", 'pickle names the global "builtins.eval", which a state dict never needs; refused')
    hostile_zip("hostile_popen.pt", Popen(), 4)
    expect_error("hostile_popen.pt", 'pickle names the global "subprocess.Popen", which a state dict never needs; refused')
    hostile_zip("hostile_getattr.pt", GetAttr(), 4)
    expect_error("hostile_getattr.pt", 'pickle names the global "builtins.getattr", which a state dict never needs; refused')
    # the legacy format: the first four pickles of legacy.pt, then os.system
    data = open(path("legacy.pt"), "rb").read()
    r = legacy_pickles(data)
    write("hostile_legacy.pt", data[:r[3][0]] + pickle.dumps({"w": System()}, protocol=2))
    expect_error("hostile_legacy.pt", 'pickle names the global "posix.system", which a state dict never needs; refused')

    # refused: not a state dict
    save("whole_module.pt", torch.nn.Linear(2, 2))
    expect_error("whole_module.pt", 'pickle names the global "torch.nn.modules.linear.Linear", which a state dict never needs; refused')
    save("list.pt", [torch.zeros(2)])
    expect_error("list.pt", "the pickle holds a list, not a state dict")
    save("not_tensor.pt", {"w": torch.zeros(2), "step": 5})
    expect_error("not_tensor.pt", 'the state dict\'s value for "step" is an int, not a tensor')

    # refused: damaged or unusual archives (stored entries of f32.pt)
    good = renamed(zip_entries("f32.pt"), "f32/", "z/")
    write("encrypted.pt", build_zip(good, flags=1))
    expect_error("encrypted.pt", 'entry "z/data.pkl" is encrypted')
    write("multidisk.pt", build_zip(good, disk=1))
    expect_error("multidisk.pt", "the archive spans several disks")
    write("duplicate.pt", build_zip(good + [good[1]]))
    expect_error("duplicate.pt", 'the archive has two entries named "z/data/0"')
    write("two_dirs.pt", build_zip(good + [("other/x", b"x")]))
    expect_error("two_dirs.pt", "the archive's entries are not all in one directory")
    write("missing_storage.pt", build_zip([e for e in good if e[0] != "z/data/1"]))
    expect_error("missing_storage.pt", 'storage "1" is not in the archive')
    write("storage_size.pt", build_zip([(n, d + b"\0\0\0\0" if n == "z/data/0" else d) for n, d in good]))
    expect_error("storage_size.pt", 'storage "0" has 52 bytes in the archive, but 12 elements of float32 take 48')
    write("no_data_pkl.pt", build_zip([e for e in good if not e[0].endswith("data.pkl")]))
    expect_error("no_data_pkl.pt", "the archive has no z/data.pkl")
    write("big_endian.pt", build_zip(good + [("z/byteorder", b"big")]))
    expect_error("big_endian.pt", 'the checkpoint was saved with byte order "big"')
    little = build_zip(good + [("z/byteorder", b"little")])
    write("byteorder.pt", little)
    expect_ok("byteorder.pt")
    # data.pkl's CRC-32 spoilt in its local header and the directory alike
    crc = zlib.crc32(dict(good)["z/data.pkl"])
    z = build_zip(good).replace(struct.pack("<I", crc), struct.pack("<I", crc ^ 0xFF))
    write("bad_crc.pt", z)
    expect_error("bad_crc.pt", 'is corrupt (its CRC-32 does not match)')
    write("truncated.pt", open(path("f32.pt"), "rb").read()[:700])
    expect_error("truncated.pt", "no end of central directory record")
    write("legacy_truncated.pt", data[:len(data) - 5])
    expect_error("legacy_truncated.pt", "lies beyond the end of the file")

    # refused: other formats
    tarfile.RECORDSIZE = 512  # no 10 KB padding
    with tarfile.open(path("tar.pt"), "w", format=tarfile.PAX_FORMAT) as t:
        for member in ("sys_info", "pickle", "storages", "tensors"):
            info = tarfile.TarInfo(member)
            info.size = 1
            t.addfile(info, io.BytesIO(b"\x00"))
    expect_error("tar.pt", "the file is a tar archive, the checkpoint format of torch before 0.4")
    write("text.pt", b"this is not a checkpoint\n")
    expect_error("text.pt", "neither a ZIP archive nor a pickle")

    with open(path("expected.txt"), "w") as f:
        f.write("# tools/gen_torch_fixtures.py; read by test/unit/test_torch.c\n")
        f.write("\n".join(expected) + "\n")
    assert not os.path.exists(MARKER)

    # fuzz seeds: whole files, and pickles alone
    for d in (SEEDS_ZIP, SEEDS_PICKLE):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    for name in ("f32.pt", "module.pt", "tied.pt", "views.pt", "legacy.pt", "legacy_view.pt", "zip64.pt",
                 "proto4.pt", "train.pt", "byteorder.pt"):
        shutil.copy(path(name), os.path.join(SEEDS_ZIP, name))
    for name in ("f32.pt", "module.pt", "param.pt", "proto1.pt", "proto4.pt", "train.pt", "dtypes.pt",
                 "hostile_eval4.pt"):
        with zipfile.ZipFile(path(name)) as z:
            pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
            with open(os.path.join(SEEDS_PICKLE, name[:-3] + ".pkl"), "wb") as f:
                f.write(z.read(pkl))
    for name in ("legacy.pt", "legacy_view.pt"):
        data = open(path(name), "rb").read()
        r = legacy_pickles(data)
        with open(os.path.join(SEEDS_PICKLE, name[:-3] + ".pkl"), "wb") as f:
            f.write(data[r[3][0]:r[3][1]])

    total = sum(os.path.getsize(path(n)) for n in os.listdir(OUT))
    print(f"{len(os.listdir(OUT))} files, {total} bytes in {OUT}; "
          f"{len(os.listdir(SEEDS_ZIP))} + {len(os.listdir(SEEDS_PICKLE))} seeds", file=sys.stderr)


if __name__ == "__main__":
    main()
