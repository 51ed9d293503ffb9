#!/usr/bin/python3
"""Side by side on real data formats: torch's DataLoader over the Python stack,
and `feedtune trial` over feedtune's native readers, on the same files.

`feedtune gen-data` writes each format once; then, per format:

  npy   numpy.load(mmap_mode="r"), a row copied per sample    | kind: npy, io: mmap
  hdf5  h5py, the file opened lazily in each worker, [i]      | kind: hdf5 (gzip:4, one sample per chunk)
  lmdb  python3-lmdb, opened lazily in each worker, get(key)  | kind: lmdb
  jpeg  PIL open + convert("RGB") + torchvision                | kind: files, decode: jpeg, crop: random
        RandomResizedCrop(224), uint8 HWC (no ToTensor)       |
  tfrecord  a pure-Python reader: the .idx offsets, one seek   | kind: tfrecord, access: random (whole
        + read per record, map-style (no CRC check: there is  |   records, both CRCs checked)
        no pure-Python CRC32C fast enough to use)             |
  tar   a WebDataset-style IterableDataset on `tarfile`: the  | kind: tar, access: stream,
        shards split by worker (get_worker_info), members     |   shuffle_buffer 100
        grouped by key, a shuffle buffer of 100               |
The samples of tfrecord (an Example's size varies with its varint) and tar are
padded to the longest in the batch by the Python side's collate, as feedtune's
slots hold each sample at the largest sample's stride.

Both stacks read warm files (page cache), shuffle, batch 32, persistent
workers, no per-sample CPU work beyond the format's own (feedtune:
cpu_us_per_sample 0; a host-sim device with free copies, as
bench/compare_torch.py's bare-loader column), and measure steady-state
samples/s after 4 warm-up batches. Printed per format: the per-sample cost on
one core (0 workers: the loader's own thread does everything), the curve over
num_workers, and each stack's peak (the fewest workers within 5% of the best).
For JPEG also the decode + crop + resize alone, one thread, the same files in
the same shuffled order: PIL + torchvision in a Python loop against
`feedtune inspect`'s measurement (libjpeg-turbo, read + decode + crop + resize),
medians per sample.

Targets: per format, the peaks agree within one doubling;
for tfrecord and tar the native per-sample cost is at or below Python's; the native
JPEG decode + resize is at least 1.3x PIL's per-core rate. Exits 1 when a target
is missed.

Usage: bench/formats.py [--feedtune build/tuner/cli/feedtune] [--long] [--seconds S] [--samples N]
                        [--formats npy,hdf5,lmdb,jpeg] [--workers 0,1,2,4] [--data DIR]
The default run takes about 3-4 minutes on 2 CPUs; --long measures 4 s per
point over 3000 samples and workers up to 8.
"""
import argparse
import glob
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings

import h5py
import lmdb
import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_torch import DEVICES, loader_rate, peak  # noqa: E402  (the bare-loader device, the timed loop, the knee)
from jpeg_folder import RESIZE, JpegFolder, jpeg_files  # noqa: E402  (the torch side of a JPEG folder)

# More workers than CPUs is part of the curve on a small box: torch's warning about it is noise here.
warnings.filterwarnings("ignore", message="This DataLoader will create")

FORMATS = ["npy", "hdf5", "lmdb", "jpeg", "tfrecord", "tar"]
BATCH = 32
SAMPLE_BYTES = {"npy": 150528, "hdf5": 150528, "lmdb": 110000, "tfrecord": 110000, "tar": 110000}  # a 224x224x3
# image; a ~110 KB record
SHARDS = 8           # tfrecord and tar files
SHUFFLE_BUFFER = 100  # tar: samples per worker, both stacks


# ---- The Python stack: one Dataset per format, each opened lazily in the
# process that reads it (a handle opened before the workers fork is the trap
# pytorch#11887 / #113228 describe).

class NpyRows(Dataset):
    def __init__(self, path):
        self.path, self.rows = path, None
        self.n = np.load(path, mmap_mode="r").shape[0]

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.rows is None:
            self.rows = np.load(self.path, mmap_mode="r")
        return torch.from_numpy(np.array(self.rows[i]))


class H5Rows(Dataset):
    def __init__(self, path):
        self.path, self.images = path, None
        with h5py.File(path, "r") as f:
            self.n = f["/images"].shape[0]

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.images is None:
            self.images = h5py.File(self.path, "r")["/images"]
        return torch.from_numpy(self.images[i])


class LmdbValues(Dataset):
    def __init__(self, path, n):
        self.path, self.n, self.env = path, n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.env is None:
            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin(buffers=True) as txn:
            return torch.from_numpy(np.frombuffer(txn.get(b"%09d" % i), dtype=np.uint8).copy())


class TfRecordRecords(Dataset):
    """Pure Python TFRecord, map-style: the records of every file, by the .idx
    files gen-data (or DALI's tfrecord2idx) wrote beside them."""

    def __init__(self, root):
        self.paths = sorted(glob.glob(os.path.join(root, "*.tfrecord")))
        self.entries = []  # (file number, offset, framed size)
        for n, path in enumerate(self.paths):
            with open(path + ".idx") as f:
                for line in f:
                    offset, size = line.split()
                    self.entries.append((n, int(offset), int(size)))
        self.files = None

    def __len__(self):
        return len(self.entries)

    def __getitem__(self, i):
        if self.files is None:
            self.files = [open(p, "rb") for p in self.paths]
        n, offset, size = self.entries[i]
        f = self.files[n]
        f.seek(offset)
        framed = f.read(size)
        length = int.from_bytes(framed[:8], "little")
        return torch.frombuffer(bytearray(framed[12:12 + length]), dtype=torch.uint8)


class TarShards(torch.utils.data.IterableDataset):
    """WebDataset's way with `tarfile`: each worker streams its shards
    (shards[worker::workers]), groups members by key, and shuffles through a buffer."""

    def __init__(self, root, buffer):
        self.paths = sorted(glob.glob(os.path.join(root, "*.tar")))
        self.buffer = buffer

    def samples(self, paths):
        for path in paths:
            with tarfile.open(path, mode="r|") as tar:
                key, fields = None, []
                for member in tar:
                    if not member.isfile():
                        continue
                    base = os.path.basename(member.name)
                    if "." not in base:
                        continue
                    k = os.path.join(os.path.dirname(member.name), base.split(".", 1)[0])
                    if k != key and fields:
                        yield b"".join(fields)
                        fields = []
                    key = k
                    fields.append(tar.extractfile(member).read())
                if fields:
                    yield b"".join(fields)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        mine = self.paths[info.id::info.num_workers] if info else self.paths
        rng, buf = random.Random(), []
        for sample in self.samples(mine):
            if len(buf) < self.buffer:
                buf.append(sample)
                continue
            k = rng.randrange(len(buf))
            buf[k], sample = sample, buf[k]
            yield torch.frombuffer(bytearray(sample), dtype=torch.uint8)
        rng.shuffle(buf)
        for sample in buf:
            yield torch.frombuffer(bytearray(sample), dtype=torch.uint8)


def pad_collate(samples):
    """Stacks samples of unequal length, each padded to the longest (feedtune's slot stride)."""
    return torch.nn.utils.rnn.pad_sequence(samples, batch_first=True)


def torch_dataset(fmt, path, samples):
    if fmt == "npy":
        return NpyRows(path)
    if fmt == "hdf5":
        return H5Rows(path)
    if fmt == "lmdb":
        return LmdbValues(path, samples)
    if fmt == "tfrecord":
        return TfRecordRecords(path)
    if fmt == "tar":
        return TarShards(path, SHUFFLE_BUFFER)
    return JpegFolder(jpeg_files(path))


def torch_rate(dataset, workers, seconds):
    sharded = isinstance(dataset, (TfRecordRecords, TarShards))
    return loader_rate(dataset, BATCH, workers, seconds, collate_fn=pad_collate if sharded else None)


# ---- feedtune: the same files through `feedtune trial`.

def workload_yaml(fmt, path):
    common = "cache: warm, cpu_us_per_sample: 0, jitter: 0"
    if fmt == "npy":
        return f"{{kind: npy, path: {path}, io: mmap, {common}}}"
    if fmt == "hdf5":
        return f"{{kind: hdf5, path: {path}, dataset: /images, labels: null, {common}}}"
    if fmt == "lmdb":
        return f"{{kind: lmdb, path: {path}, {common}}}"
    if fmt == "tfrecord":
        return f"{{kind: tfrecord, path: {path}, access: random, {common}}}"
    if fmt == "tar":
        return f"{{kind: tar, path: {path}, access: stream, shuffle_buffer: {SHUFFLE_BUFFER}, {common}}}"
    return f"{{kind: files, path: {path}, layout: files, decode: jpeg, crop: random, resize: {RESIZE}, {common}}}"


def feedtune_rate(binary, fmt, path, workers, seconds, tmp):
    config = os.path.join(tmp, f"formats-{fmt}.yaml")
    with open(config, "w") as f:
        f.write(f"""name: formats-{fmt}
workload: {workload_yaml(fmt, path)}
loader: {{batch_size: {BATCH}, worker_mode: process, persistent_workers: true}}
device: {DEVICES["free"]}
sweep: {{repeats: 1, warmup_batches: 4, measure_seconds: {seconds}}}
""")
    out = subprocess.run([binary, "trial", config, "--set", f"loader.num_workers={workers}",
                          "--set", f"loader.persistent_workers={'true' if workers > 0 else 'false'}", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_s"]


def generate(binary, fmt, path, samples):
    if os.path.exists(path):
        return  # --data DIR kept from an earlier run (gen-data refuses to overwrite)
    args = [binary, "gen-data", "-q", "--out", path, "--layout", fmt, "--samples", str(samples)]
    if fmt == "hdf5":
        args += ["--chunk-samples", "1", "--compression", "gzip:4"]
    if fmt in ("tfrecord", "tar"):
        args += ["--shards", str(SHARDS)]
    if fmt != "jpeg":
        args += ["--sample-bytes", str(SAMPLE_BYTES[fmt])]
    subprocess.run(args, check=True)


# ---- JPEG decode + crop + resize alone, one thread.

def pil_per_sample_s(files, order):
    crop = transforms.RandomResizedCrop(RESIZE)
    times = []
    for i in order:
        start = time.perf_counter()
        with open(files[i], "rb") as f:  # read whole, as feedtune's io: pread
            im = Image.open(f)
            img = crop(im.convert("RGB"))
            np.asarray(img)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def native_per_sample_s(binary, path):
    out = subprocess.run([binary, "inspect", path, "--crop", "random", "--resize", str(RESIZE), "--measure-seconds",
                          "1", "--format", "json"], check=True, capture_output=True, text=True).stdout
    m = json.loads(out)["measurement"]
    return m, m["read_us_median"] / 1e6


def fmt_us(seconds):
    return f"{seconds * 1e6:9.0f} us"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--feedtune", default="build/tuner/cli/feedtune")
    parser.add_argument("--long", action="store_true", help="4 s per point, 3000 samples, workers 0,1,2,4,8")
    parser.add_argument("--seconds", type=float, help="measurement per point (default 1.5; --long: 4)")
    parser.add_argument("--samples", type=int, help="samples per format (default 1000; --long: 3000)")
    parser.add_argument("--workers", help="comma-separated num_workers (default 0,1,2,4; --long: 0,1,2,4,8)")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated subset of " + ", ".join(FORMATS))
    parser.add_argument("--data", help="keep the generated files in DIR (reused when present) instead of a temp dir")
    args = parser.parse_args()
    seconds = args.seconds or (4.0 if args.long else 1.5)
    samples = args.samples or (3000 if args.long else 1000)
    workers = [int(w) for w in (args.workers or ("0,1,2,4,8" if args.long else "0,1,2,4")).split(",")]
    formats = args.formats.split(",")
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        parser.error(f"unknown format {', '.join(unknown)} (known: {', '.join(FORMATS)})")
    if not os.access(args.feedtune, os.X_OK):
        parser.error(f"{args.feedtune}: no feedtune binary there (build one: make build, or pass --feedtune)")

    import PIL
    print(f"torch {torch.__version__}, h5py {h5py.__version__}, lmdb {'.'.join(map(str, lmdb.version()))}, "
          f"PIL {PIL.__version__}, numpy {np.__version__}; {os.cpu_count()} CPUs; {samples} samples per format, "
          f"{seconds:g} s per point, batch {BATCH}, warm files, persistent workers")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or tmp
        os.makedirs(data, exist_ok=True)
        rows = []
        for fmt in formats:
            path = os.path.join(data, {"npy": "rows.npy", "hdf5": "rows.h5", "lmdb": "rows.lmdb",
                                       "jpeg": "jpeg", "tfrecord": "tfrecords", "tar": "tars"}[fmt])
            generate(args.feedtune, fmt, path, samples)
            dataset = torch_dataset(fmt, path, samples)
            t_rates, f_rates = {}, {}
            for w in workers:  # alternating the stacks point by point, so a busy moment hits both
                t_rates[w] = torch_rate(dataset, w, seconds)
                f_rates[w] = feedtune_rate(args.feedtune, fmt, path, w, seconds, tmp)
            rows.append((fmt, t_rates, f_rates))
            print(f"\n{fmt}: samples/s by num_workers; per-sample cost on one core = 1 / the 0-worker rate")
            print(f"  {'stack':9} {'1 core':>12} " + " ".join(f"{'w=' + str(w):>9}" for w in workers) + "  peak")
            for name, rates in (("torch", t_rates), ("feedtune", f_rates)):
                one = fmt_us(1 / rates[0]) if 0 in rates else f"{'-':>12}"
                print(f"  {name:9} {one} " + " ".join(f"{rates[w]:9.0f}" for w in workers) +
                      f"  {peak(rates)} workers ({max(rates.values()):.0f}/s)")
            tp, fp = peak(t_rates), peak(f_rates)
            hit = max(tp, fp) <= 2 * max(min(tp, fp), 1)
            print(f"  peaks: torch {tp} workers, feedtune {fp} workers (target: within one doubling): "
                  f"{'ok' if hit else 'MISSED'}", flush=True)
            ok = ok and hit
            if fmt in ("tfrecord", "tar") and 0 in workers:
                ratio = f_rates[0] / t_rates[0]
                hit = ratio >= 1.0
                print(f"  per-sample cost on one core: native {fmt_us(1 / f_rates[0]).strip()}, Python "
                      f"{fmt_us(1 / t_rates[0]).strip()}: native at {ratio:.2f}x Python's rate "
                      f"(target >= 1.0x): {'ok' if hit else 'MISSED'}", flush=True)
                ok = ok and hit
            if fmt == "jpeg":
                # Three rounds, the stacks alternating, so that a busy moment of the box hits both; medians.
                files = jpeg_files(path)
                pil, native, measured = [], [], 0
                for round_ in range(3):
                    order = random.Random(round_).sample(range(len(files)), min(len(files), 150))
                    pil.append(pil_per_sample_s(files, order))
                    measurement, native_s = native_per_sample_s(args.feedtune, path)
                    native.append(native_s)
                    measured += measurement["samples"]
                pil_s, native_s = statistics.median(pil), statistics.median(native)
                ratio = pil_s / native_s
                hit = ratio >= 1.3
                print(f"  decode + crop + resize, one thread, median per sample over 3 alternating rounds: "
                      f"PIL + torchvision {pil_s * 1e3:.2f} ms ({3 * len(order)} reads), libjpeg-turbo in feedtune "
                      f"{native_s * 1e3:.2f} ms ({measured} reads): {ratio:.2f}x the per-core rate "
                      f"(target >= 1.3x): {'ok' if hit else 'MISSED'}", flush=True)
                ok = ok and hit
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
