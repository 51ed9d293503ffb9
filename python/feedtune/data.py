"""feedtune.data: a training job reads what `feedtune convert` wrote, in one
line (docs/layout.md#reading-it-in-a-job).

    from feedtune import data
    ds = data.open("/data/train-tar")                  # map-style: ds[i] is (bytes, label), sample i of the source
    ds = data.open("/data/train-tar", decode=True)     # (C, H, W) uint8 image tensors (JPEG samples; Pillow)
    ds = data.open("/data/train-tar", transform=f)     # f(sample) applied to each sample
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=8)

    it = data.open("/data/train-tar", iterable=True)   # tar shards: an IterableDataset whose shards are
    loader = torch.utils.data.DataLoader(it, batch_size=64, num_workers=8)   # split by rank, then by worker

    ds = data.open("s3://bucket/train-tar", fetch_concurrency=16)   # on a store: ranged GETs, 16 in flight
    loader = torch.utils.data.DataLoader(ds, **data.batch_fetch(ds, batch_size=64, shuffle=True), num_workers=4)
    it = data.open("s3://bucket/train-tar", iterable=True, fetch_concurrency=4)   # shards streamed, 4 windows ahead

Every layout convert writes is read here (tar shards, HDF5, npy, LMDB), with
what Debian packages for Python: torch, numpy, h5py (HDF5), python3-lmdb
(LMDB), and Pillow for decode=True. Sample i of the dataset is sample i of
the source convert read (the index, DST/index.ftmap, maps the numbering;
samples convert skipped as bad are left out, and ds.source_index(i) says
which source sample i is). A sample is its bytes as stored, or with
decode=True the image; with the label (an int) where the source had labels:
(sample, label); else the sample alone.

Files are opened lazily in each process (after a DataLoader forks its
workers): h5py and LMDB handles must not cross a fork.

On an object store (s3://, or http(s):// where a server has the files;
feedtune/objects.py) the tar layout is read, by ranges: a sample is one
ranged GET. A store answers each request after a round trip, so one worker
reads a sample per round trip; fetch_concurrency=N holds N requests in
flight inside each worker. torch 1.13's DataLoader asks a map-style dataset
for one sample at a time, so the requests of a batch go out together only
when the dataset is given the batch: batch_fetch(ds, ...) gives the
DataLoader's arguments that do that (a BatchSampler as the sampler,
batch_size=None); torch 2's DataLoader calls ds.__getitems__ by itself. A
stream (iterable=True) reads each shard in windows of up to 8 MiB of
consecutive samples, N windows ahead.
"""

import builtins  # open() is this module's own name, as in the one-line API
import json
import os

import numpy as np
import torch
from torch.utils.data import BatchSampler, Dataset, IterableDataset, RandomSampler, SequentialSampler, get_worker_info

from . import objects

MANIFEST = "feedtune-dataset.json"
STATE = "convert-state.json"
FORMAT = "feedtune-converted"
VERSION = 1
INDEX_DTYPE = np.dtype([("source", "<i8"), ("file", "<i8"), ("offset", "<i8"), ("bytes", "<i8"), ("label", "<i8"),
                        ("crc32c", "<u4"), ("zero", "<u4")])
INDEX_MAGIC = b"FTMAP\0\0\1"
STREAM_WINDOW_BYTES = 8 << 20  # a stream's ranged GET: consecutive samples up to this (the native stream's window)


class DataError(Exception):
    """DST is not a finished, readable convert; the message says why and what to do."""


def open(path, decode=False, transform=None, iterable=False, rank=None, world_size=None,  # noqa: A001
         fetch_concurrency=1):
    """The dataset at `path`: a folder `feedtune convert` wrote, or the same
    on a store (s3://bucket/prefix, http(s)://host/path; the tar layout).

    decode: JPEG samples decoded to (C, H, W) uint8 tensors (needs python3-pil);
        raw pixels (convert --pixels) as the same tensors, with no decode.
    transform: applied to each sample (after decode), as torchvision's transform=.
    iterable: tar shards only: a torch IterableDataset; each rank reads its
      share of the shards (rank, world_size: torch.distributed's when it is
      initialised, else 0 and 1), and each DataLoader worker its share of those.
    fetch_concurrency: on a store, the requests in flight inside each process
      (each DataLoader worker): a batch's samples (batch_fetch) or a stream's
      windows. Settable later (ds.fetch_concurrency = N), as autotune does.
    """
    if int(fetch_concurrency) < 1:
        raise ValueError("fetch_concurrency is the requests in flight per process: 1 or more, not %r"
                         % (fetch_concurrency,))
    store = objects.open_prefix(path) if objects.is_remote(path) else None
    manifest = _read_manifest(path, store)
    index = _read_index(path, manifest, store)
    if store is not None and manifest["layout"] != "tar":
        raise DataError("%s: a %s dataset; on a store feedtune reads tar shards, by ranges: convert with "
                        "--layout tar, or copy it to a local folder" % (path, manifest["layout"]))
    if decode and manifest.get("payload") not in ("jpg", "ppm"):
        raise DataError("%s: decode=True decodes JPEG samples (or raw pixels, convert --pixels), and this dataset's "
                        "samples are '%s' (as stored); leave out decode" % (path, manifest.get("payload")))
    if iterable:
        if manifest["layout"] != "tar":
            raise DataError("%s: iterable=True streams tar shards, and this dataset is %s (read by index): leave out "
                            "iterable, or convert with --layout tar" % (path, manifest["layout"]))
        stream = ShardStream(path, manifest, index, decode, transform, rank, world_size, store)
        stream.fetch_concurrency = int(fetch_concurrency)
        return stream
    dataset = ConvertedDataset(path, manifest, index, decode, transform, store)
    dataset.fetch_concurrency = int(fetch_concurrency)
    return dataset


def batch_fetch(dataset, batch_size, shuffle=False, drop_last=False, generator=None, collate_fn=None):
    """The DataLoader arguments under which torch 1.13 hands `dataset` a
    whole batch of indices, so that its samples are fetched together
    (dataset.fetch_concurrency in flight): a BatchSampler as the sampler,
    batch_size=None, and the batch collated as automatic batching would
    (collate_fn, default: torch's default_collate). Shuffled, the order is
    RandomSampler(dataset, generator=generator)'s.

        DataLoader(ds, num_workers=4, **data.batch_fetch(ds, batch_size=64, shuffle=True))
    """
    from torch.utils.data import default_collate
    sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    collate = collate_fn or default_collate
    return {"sampler": BatchSampler(sampler, batch_size, drop_last), "batch_size": None,
            "collate_fn": collate}


def _read_manifest(path, store=None):
    if store is not None:
        return _check_manifest(store.name(MANIFEST), _read_remote_manifest(path, store))
    name = os.path.join(path, MANIFEST)
    if not os.path.isdir(path):
        raise DataError("%s: no such folder (feedtune.data.open reads a folder `feedtune convert` wrote)" % path)
    if not os.path.exists(name):
        if os.path.exists(os.path.join(path, STATE)):
            raise DataError("%s: an interrupted convert (it has %s and no %s): run the same `feedtune convert` "
                            "command with --resume to finish it" % (path, STATE, MANIFEST))
        raise DataError("%s: no %s, so not a dataset `feedtune convert` wrote (or not a finished one)"
                        % (path, MANIFEST))
    try:
        with builtins.open(name) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise DataError("%s: cannot read (%s); convert again" % (name, e))
    return _check_manifest(name, manifest)


def _read_remote_manifest(path, store):
    try:
        text = store.get(MANIFEST)
    except objects.StoreError as e:
        missing = "no such object" in str(e) or ": 404 " in str(e)
        raise DataError(("%s: no %s there, so not a dataset `feedtune convert` wrote (or not a finished one): %s"
                         % (path, MANIFEST, e)) if missing else str(e)) from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise DataError("%s: cannot read (%s); convert again" % (store.name(MANIFEST), e)) from None


def _check_manifest(name, manifest):
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise DataError("%s: format %r version %r; this feedtune reads %s version %d" %
                        (name, manifest.get("format"), manifest.get("version"), FORMAT, VERSION))
    return manifest


def _read_index(path, manifest, store=None):
    if store is not None:
        name = store.name(manifest["index"]["file"])
        try:
            raw = store.get(manifest["index"]["file"])
        except objects.StoreError as e:
            raise DataError(str(e)) from None
        header = raw[:16]
    else:
        name = os.path.join(path, manifest["index"]["file"])
        with builtins.open(name, "rb") as f:
            raw = f.read()
        header = raw[:16]
    if len(header) != 16 or header[:8] != INDEX_MAGIC:
        raise DataError("%s: not a feedtune index (no FTMAP header)" % name)
    count = int(np.frombuffer(header[8:], dtype="<u8")[0])
    body = raw[16:]
    index = np.frombuffer(body[:len(body) - len(body) % INDEX_DTYPE.itemsize], dtype=INDEX_DTYPE)
    if len(index) != count or count != manifest["samples"]:
        raise DataError("%s: %d records, the header says %d and the manifest %d samples; convert again"
                        % (name, len(index), count, manifest["samples"]))
    return index


class _Reader:
    """Reads sample j's stored bytes, opening the files lazily in each process
    (on a store: a ranged GET each, through the store's client of this process)."""

    def __init__(self, path, manifest, index, store=None):
        self.path = path
        self.layout = manifest["layout"]
        self.store = store
        self.names = list(manifest["files"])
        self.files = [os.path.join(path, f) for f in manifest["files"]]
        self.index = index
        self._pid = None
        self._handles = None

    def _open(self):
        if self._pid == os.getpid():
            return self._handles
        if self.layout == "tar":
            handles = [os.open(f, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)) for f in self.files]
        elif self.layout == "hdf5":
            import h5py
            handles = h5py.File(self.files[0], "r")["images"]
        elif self.layout == "npy":
            handles = np.load(self.files[0], mmap_mode="r")
        elif self.layout == "lmdb":
            import lmdb
            handles = lmdb.open(self.files[0], readonly=True, lock=False, readahead=False, subdir=True)
        else:
            raise DataError("%s: layout %r is not one this feedtune reads" % (self.path, self.layout))
        # A handle inherited through fork belongs to the parent: dropped, not closed.
        self._pid, self._handles = os.getpid(), handles
        return handles

    def read(self, j):
        if self.store is not None:
            return self.read_many([j], 1)[0]
        r = self.index[j]
        handles = self._open()
        if self.layout == "tar":
            data = os.pread(handles[int(r["file"])], int(r["bytes"]), int(r["offset"]))
        elif self.layout in ("hdf5", "npy"):
            data = np.asarray(handles[int(r["offset"])]).tobytes()
        else:
            with handles.begin(buffers=False) as txn:
                data = txn.get(b"%09d" % int(r["offset"]))
        return self._checked(j, data)

    def _checked(self, j, data):
        r = self.index[j]
        if data is None or len(data) != int(r["bytes"]):
            raise DataError("%s: sample %d (source sample %d) read %s bytes, the index says %d: the files changed "
                            "since convert verified them" % (self.path, j, int(r["source"]),
                                                             "no" if data is None else len(data), int(r["bytes"])))
        return data

    def read_many(self, js, in_flight):
        """Samples js, in order; on a store with up to `in_flight` ranged GETs
        outstanding, else one after another."""
        if self.store is None:
            return [self.read(j) for j in js]
        reads = [(self.names[int(self.index[j]["file"])], int(self.index[j]["offset"]), int(self.index[j]["bytes"]))
                 for j in js]
        try:
            got = self.store.get_many(reads, in_flight)
        except objects.StoreError as e:
            raise DataError(str(e)) from None
        return [self._checked(j, data) for j, data in zip(js, got)]

    def __del__(self):
        if self._pid == os.getpid() and self.layout == "tar" and self.store is None:
            for fd in self._handles:
                os.close(fd)

    def __getstate__(self):  # handles do not travel to spawned workers; each opens its own
        state = dict(self.__dict__)
        state["_pid"], state["_handles"] = None, None
        return state


def _ppm_pixels(data):
    """Raw pixels as convert --pixels stores them (binary PPM, 8-bit RGB):
    a (C, H, W) uint8 tensor, with no decode and no Pillow."""
    fields, pos = [], 2
    while len(fields) < 3:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        end = pos
        while data[end:end + 1].isdigit():
            end += 1
        fields.append(int(data[pos:end]))
        pos = end
    width, height, maxval = fields
    if maxval != 255 or len(data) - pos - 1 != width * height * 3:
        raise DataError("a raw-pixel sample of %d x %d (maxval %d) holds %d bytes of pixels: damaged"
                        % (width, height, maxval, len(data) - pos - 1))
    array = np.frombuffer(data, dtype=np.uint8, offset=pos + 1).reshape(height, width, 3)
    return torch.from_numpy(array.copy()).permute(2, 0, 1)


def _decode_image(data):
    if data[:2] == b"P6":
        return _ppm_pixels(data)
    try:
        from PIL import Image
    except ImportError:
        raise DataError("decode=True decodes JPEG with Pillow, which is not installed: apt-get install python3-pil "
                        "(or leave out decode and decode in your transform)")
    import io
    with Image.open(io.BytesIO(data)) as image:
        array = np.asarray(image.convert("RGB"))
    return torch.from_numpy(array.copy()).permute(2, 0, 1)


class ConvertedDataset(Dataset):
    """Map-style: sample i of the source (as numbered by the index), with its label."""

    def __init__(self, path, manifest, index, decode=False, transform=None, store=None):
        self.path = path
        self.manifest = manifest
        self.labels = bool(manifest.get("labels"))
        self.decode = decode
        self.transform = transform
        self.fetch_concurrency = 1  # a batch's requests in flight, on a store (__getitems__)
        self._reader = _Reader(path, manifest, index, store)

    def __len__(self):
        return len(self._reader.index)

    @property
    def reads_remote(self):
        """Whether samples come from a store (fetch_concurrency then matters; autotune tunes it)."""
        return self._reader.store is not None

    def source_index(self, i):
        """Which sample of the source sample i is (they differ only past a sample convert skipped)."""
        return int(self._reader.index[i]["source"])

    def _item(self, j, sample=None):
        if sample is None:
            sample = self._reader.read(j)
        if self.decode:
            sample = _decode_image(sample)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.labels:
            return sample, int(self._reader.index[j]["label"])
        return sample

    def _position(self, i):
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("sample %d of %d" % (i, n))
        return i

    def __getitem__(self, i):
        if isinstance(i, (list, tuple)):  # a batch of indices (batch_fetch's BatchSampler)
            return self.__getitems__(i)
        return self._item(self._position(i))

    def __getitems__(self, indices):
        """The samples of a batch of indices, in order, fetched together:
        fetch_concurrency ranged GETs in flight on a store."""
        js = [self._position(int(i)) for i in indices]
        samples = self._reader.read_many(js, self.fetch_concurrency)
        return [self._item(j, sample) for j, sample in zip(js, samples)]


class ShardStream(IterableDataset):
    """Tar shards streamed: rank r of W reads shards r, r+W, r+2W, ...; worker
    k of K of that rank reads the k-th, (k+K)-th, ... of those, each shard
    front to back (one pread per sample, offsets rising). Samples come as
    the map-style dataset gives them."""

    def __init__(self, path, manifest, index, decode=False, transform=None, rank=None, world_size=None, store=None):
        if (rank is None) != (world_size is None):
            raise ValueError("give rank and world_size together, or neither (then torch.distributed's)")
        if rank is None and torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()
        self.rank, self.world_size = (0, 1) if rank is None else (int(rank), int(world_size))
        if not 0 <= self.rank < self.world_size:
            raise ValueError("rank %d is not in [0, world_size %d)" % (self.rank, self.world_size))
        self._map = ConvertedDataset(path, manifest, index, decode, transform, store)
        self.fetch_concurrency = 1  # on a store: windows in flight ahead of the one being read
        shards = len(manifest["files"])
        self.shards = list(range(self.rank, shards, self.world_size))
        # Each shard's samples in file order (the order a streaming reader reads).
        order = np.lexsort((index["offset"], index["file"]))
        self._by_shard = {}
        for j in order:
            self._by_shard.setdefault(int(index[j]["file"]), []).append(int(j))

    def __len__(self):
        """The samples of this rank's shards (of all its workers together)."""
        return sum(len(self._by_shard.get(s, ())) for s in self.shards)

    def worker_shards(self):
        info = get_worker_info()
        workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        return self.shards[worker::workers]

    def __iter__(self):
        reader = self._map._reader
        if reader.store is None:
            for shard in self.worker_shards():
                for j in self._by_shard.get(shard, ()):
                    yield self._map._item(j)
            return
        yield from self._stream_remote(reader)

    def _windows(self):
        """This worker's samples as windows: runs of consecutive samples of one
        shard, each read by one ranged GET of at most STREAM_WINDOW_BYTES
        (a sample larger than that is a window alone)."""
        index = self._map._reader.index
        for shard in self.worker_shards():
            window, start, end = [], 0, 0
            for j in self._by_shard.get(shard, ()):
                offset, size = int(index[j]["offset"]), int(index[j]["bytes"])
                if window and offset + size - start > STREAM_WINDOW_BYTES:
                    yield shard, start, end, window
                    window = []
                if not window:
                    start = offset
                window.append(j)
                end = offset + size
            if window:
                yield shard, start, end, window

    def _stream_remote(self, reader):
        """The windows read with fetch_concurrency of them in flight, ahead of
        the one being handed out; samples sliced from each window in order."""
        import collections
        store, index = reader.store, reader.index
        ahead = max(1, int(self.fetch_concurrency))
        pool = store._executor(ahead) if ahead > 1 else None
        windows = self._windows()
        pending = collections.deque()

        def fetch(window):
            shard, start, end, _ = window
            return store.get(reader.names[shard], start, end - start)

        def submit():
            window = next(windows, None)
            if window is not None:
                pending.append((window, pool.submit(fetch, window) if pool else None))

        for _ in range(ahead):
            submit()
        while pending:
            window, future = pending.popleft()
            submit()
            try:
                data = future.result() if future is not None else fetch(window)
            except objects.StoreError as e:
                raise DataError(str(e)) from None
            start = window[1]
            for j in window[3]:
                offset, size = int(index[j]["offset"]) - start, int(index[j]["bytes"])
                yield self._map._item(j, reader._checked(j, data[offset:offset + size]))
