"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) from the example kernels:

  ir_parse        the traced tile IR of each Python example (at its knit-run shapes) and the
                  golden IR files of tests/golden
  engine_program  each example's lowered engine program (its IR, allocations and queues)
  cache_entry     each program as a sound cache entry for the target's key "k", and the same
                  payload behind a leading 0x01 (the target then builds the entry itself)
  kernel_manifest manifests naming the example files (paths relative to the repository: run the
                  fuzzer from its top folder) with their real hashes and folder times, and stale ones

Run from the repository's top folder with the normal build's knit importable:
    PYTHONPATH=python python3 tests/fuzz/make_corpus.py
Seeds larger than MAX_BYTES are skipped, to keep the committed corpus small.
"""
import glob
import hashlib
import os
import re
import shutil
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
MAX_BYTES = 24_000
KEY = "k"  # the key every cache entry of the fuzz target is loaded under (fuzz_cache_entry.cpp)


def relative(text):
    """Source locations relative to the repository's top folder (the same on every machine)."""
    return text.replace(f'"{TOP}/', '"')


def example_programs():
    """(name, IR text, engine program text) of each Python example at its knit-run shapes."""
    from knit import _kernel_file
    from knit.typing import TensorType

    for path in sorted(glob.glob(os.path.join(TOP, "examples/kernels/python/*.py"))):
        argv = _kernel_file.directive_args(path)
        shapes = [_kernel_file.parse_shape(v, "float32") for f, v in zip(argv, argv[1:]) if f == "--shape"]
        if not shapes:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernels, _, _ = _kernel_file.load_kernels(path)
        for name, kernel in sorted(kernels.items()):
            try:
                compiled = kernel.compile(*[TensorType(s, d) for s, d in shapes])
                ir, program = (relative(t) for t in (compiled.ir, compiled.program.to_text()))
                yield f"{os.path.basename(path)[:-3]}_{name}", ir, program
            except Exception as e:  # a kernel of the file that takes other arguments
                print(f"skipped {path}::{name}: {type(e).__name__}", file=sys.stderr)


def cache_entry(payload):
    """The bytes Knit's disk cache writes for KEY and `payload` (through knit._core)."""
    from knit import _core

    with tempfile.TemporaryDirectory() as d:
        assert _core.cache_store(d, ".o", KEY, payload)
        with open(os.path.join(d, KEY + ".o"), "rb") as f:
            return f.read()


def manifests():
    def sha(path):
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    files = ["examples/kernels/cpp/tensor_add.cpp", "examples/kernels/cpp/kernels.h"]
    folder = "examples/kernels/cpp"
    ns = os.stat(os.path.join(TOP, folder)).st_mtime_ns
    sound = "".join(f"file {sha(os.path.join(TOP, f))} {f}\n" for f in files) + f"dir {ns} {folder}\n"
    yield "sound", sound
    yield "stale_hash", sound.replace("file ", "file 00", 1)
    yield "stale_dir", f"file {sha(os.path.join(TOP, files[0]))} {files[0]}\ndir 1 {folder}\n"
    yield "seen", "seen\n"


def dictionary(texts):
    """libFuzzer dictionary lines: every instruction, field and ALU op name Knit's op tables
    know, every word of the seed texts (dtypes, buffers, targets, activation functions, engine
    program keywords), and the IR's punctuation."""
    from knit import _core

    words = {op["name"] for op in _core.op_table()} | {op["name"] for op in _core.alu_ops()}
    words |= {name for op in _core.op_table() for name, _ in op["fields"]}
    for text in texts:
        words |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*=?", text))
    words |= {"{", "}", "[", "]", "(", ")", "%", "@", ":", ",", "=", ">=", '"', "\n", "-1", "0", "128",
              "2147483648", "9223372036854775807", "-9223372036854775808"}

    def entry(word):  # libFuzzer's dictionary syntax: quoted, with \xNN for quotes, backslashes, controls
        return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\x{ord(c):02X}" for c in word) + '"\n'
    return "".join(entry(w) for w in sorted(words))


def write(folder, name, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > MAX_BYTES:
        print(f"skipped {folder}/{name}: {len(data)} bytes", file=sys.stderr)
        return
    os.makedirs(os.path.join(HERE, "corpus", folder), exist_ok=True)
    with open(os.path.join(HERE, "corpus", folder, name), "wb") as f:
        f.write(data)


def main():
    shutil.rmtree(os.path.join(HERE, "corpus"), ignore_errors=True)
    for golden in sorted(glob.glob(os.path.join(TOP, "tests/golden/*.tir"))):
        with open(golden, "rb") as f:
            write("ir_parse", os.path.basename(golden), f.read())
    texts = []
    for name, ir, program in example_programs():
        texts.append(program)
        write("ir_parse", name + ".tir", ir)
        write("engine_program", name + ".txt", program)
        write("cache_entry", name + ".entry", cache_entry(program.encode()))
        write("cache_entry", name + ".wrapped", b"\x01" + program.encode())
    for name, text in manifests():
        write("kernel_manifest", name, text)
    with open(os.path.join(HERE, "ir.dict"), "w") as f:
        f.write("# The tile IR's and engine programs' words (tests/fuzz/make_corpus.py writes this file)\n")
        f.write(dictionary(texts))


if __name__ == "__main__":
    main()
