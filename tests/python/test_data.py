"""feedtune.data: what `feedtune convert` writes, read through torch's own
DataLoader with worker processes, against the source read directly: the same
samples in the same numbering with the same labels, for every layout convert
writes (tar, hdf5, npy, lmdb), from a JPEG folder, an ImageFolder tree, an
HDF5 file with labels and tar shards; decoded images and raw pixels; the tar
shards as an IterableDataset split by rank and then by worker; autotune over
a DataLoader of it; and the errors.

    PYTHONPATH=python python3 -m unittest tests/python/test_data.py

Needs the feedtune binary: $FEEDTUNE_BIN, else build/tuner/cli/feedtune;
skipped (saying so) when FEEDTUNE_BIN is unset and nothing is built.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
sys.path.insert(0, os.path.join(REPO, "python"))

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import feedtune  # noqa: E402
from feedtune import data  # noqa: E402

BINARY = os.environ.get("FEEDTUNE_BIN") or os.path.join(REPO, "build", "tuner", "cli", "feedtune")


def run(*args):
    done = subprocess.run([BINARY] + list(args), capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError("feedtune %s: exit %d\n%s" % (" ".join(args), done.returncode, done.stderr))
    return done


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def as_list(batch):
    return batch


def loader_items(dataset, workers=2, **kwargs):
    """Every item the DataLoader yields, in order, through `workers` processes."""
    loader = DataLoader(dataset, batch_size=7, num_workers=workers, collate_fn=as_list, **kwargs)
    return [item for batch in loader for item in batch]


@unittest.skipUnless(os.environ.get("FEEDTUNE_BIN") or os.path.exists(BINARY),
                     "no feedtune binary: build it, or set FEEDTUNE_BIN")
class OpenConverted(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="feedtune-data-")
        p = cls.p
        run("gen-data", "--out", p("jpeg"), "--layout", "jpeg", "--samples", "40", "--image-size", "64x48", "-q")
        run("gen-data", "--out", p("a.h5"), "--layout", "hdf5", "--samples", "60", "--sample-bytes", "300",
            "--chunk-samples", "10", "--compression", "gzip:3", "-q")
        run("gen-data", "--out", p("tars"), "--layout", "tar", "--shards", "3", "--samples", "30", "--sample-bytes",
            "200", "-q")
        rng = np.random.default_rng(0)
        for cls_name in ("zebra", "ant", "moth"):
            os.makedirs(p("folder/" + cls_name))
            for k in range(4):
                with open(p("folder/%s/%d.bin" % (cls_name, k)), "wb") as f:
                    f.write(rng.integers(0, 256, size=50 + k, dtype=np.uint8).tobytes())
        run("convert", p("jpeg"), p("jpeg-tar"), "--layout", "tar", "--shard-bytes", "60000", "--shuffle", "5", "-q")
        run("convert", p("jpeg"), p("jpeg-lmdb"), "--layout", "lmdb", "-q")
        run("convert", p("jpeg"), p("jpeg-pixels"), "--layout", "lmdb", "--pixels", "-q")
        run("convert", p("folder"), p("folder-tar"), "--layout", "tar", "--labels", "folder", "--shard-bytes",
            "300", "-q")
        for layout in ("tar", "hdf5", "npy", "lmdb"):
            run("convert", p("a.h5"), p("h5-" + layout), "--layout", layout, "-q")
        run("convert", p("tars"), p("tars-npy"), "--layout", "npy", "-q")
        run("convert", p("a.h5"), p("h5-tar-shards"), "--layout", "tar", "--shard-bytes", "3000", "--shuffle", "9",
            "-q")

    @classmethod
    def p(cls, name):
        return os.path.join(cls.tmp, name)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def jpeg_files(self):
        return [read_bytes(f) for f in sorted(glob.glob(self.p("jpeg/*/*.jpg")))]

    def h5_source(self):
        with h5py.File(self.p("a.h5"), "r") as f:
            return [row.tobytes() for row in f["images"][:]], [int(x) for x in f["labels"][:]]

    def test_jpeg_folder_through_a_dataloader_with_workers(self):
        source = self.jpeg_files()
        for dst in ("jpeg-tar", "jpeg-lmdb"):
            ds = data.open(self.p(dst))
            self.assertEqual(len(ds), 40)
            self.assertEqual(loader_items(ds), source, dst)  # no labels: the sample alone
            shuffled = loader_items(ds, shuffle=True)
            self.assertEqual(sorted(shuffled), sorted(source))
            self.assertNotEqual(shuffled, source)

    def test_hdf5_source_in_every_layout_with_labels(self):
        rows, labels = self.h5_source()
        for layout in ("tar", "hdf5", "npy", "lmdb"):
            items = loader_items(data.open(self.p("h5-" + layout)))
            self.assertEqual([s for s, _ in items], rows, layout)
            self.assertEqual([y for _, y in items], labels, layout)
        # The one-line API, as a job writes it, from the package itself.
        self.assertEqual(feedtune.data.open(self.p("h5-npy"))[17], (rows[17], labels[17]))
        self.assertEqual(data.open(self.p("h5-npy"))[-1], (rows[-1], labels[-1]))
        with self.assertRaises(IndexError):
            data.open(self.p("h5-npy"))[60]

    def test_imagefolder_labels_are_the_class_folders_in_name_order(self):
        items = loader_items(data.open(self.p("folder-tar")))
        want = []
        for label, cls_name in enumerate(("ant", "moth", "zebra")):
            for k in range(4):
                want.append((read_bytes(self.p("folder/%s/%d.bin" % (cls_name, k))), label))
        self.assertEqual(items, want)

    def test_tar_shards_with_cls_labels_to_npy(self):
        ds = data.open(self.p("tars-npy"))
        self.assertEqual([y for _, y in loader_items(ds)], list(range(30)))  # gen-data's .cls: i % 1000

    def test_decoded_images(self):
        try:
            from PIL import Image
        except ImportError:
            self.skipTest("python3-pil is not installed (decode=True needs it)")
        import io
        ds = data.open(self.p("jpeg-tar"), decode=True)
        images = loader_items(ds)
        source = self.jpeg_files()
        self.assertEqual(len(images), 40)
        for image, jpeg in zip(images, source):
            want = torch.from_numpy(np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB")).copy()).permute(2, 0, 1)
            self.assertEqual(image.shape, (3, 48, 64))
            self.assertTrue(torch.equal(image, want))
        # Raw pixels (convert --pixels) read as the same tensors, with no decode.
        pixels = loader_items(data.open(self.p("jpeg-pixels"), decode=True))
        self.assertEqual(len(pixels), 40)
        for image, want in zip(pixels, images):
            self.assertTrue(torch.equal(image, want))
        flipped = data.open(self.p("jpeg-tar"), decode=True, transform=lambda t: t.flip(2))
        self.assertTrue(torch.equal(flipped[3], images[3].flip(2)))

    def test_autotune_tunes_a_loader_over_it(self):
        """feedtune.autotune over a DataLoader of data.open(DST): tuned within
        its budget, and every epoch, while tuning and after, yields every
        sample of the source once with its label."""
        from feedtune import autotune
        rows, labels = self.h5_source()
        want = sorted(zip(rows, labels))
        loader = DataLoader(data.open(self.p("h5-lmdb")), batch_size=6, shuffle=True, collate_fn=as_list)
        tuned = autotune(loader, results=self.p("job.db"), budget_s=2.0, feedtune_bin=BINARY, verbose=False)
        try:
            after = 0
            for _ in range(40):
                self.assertEqual(sorted(item for batch in tuned for item in batch), want)
                if tuned.phase != "tuning":
                    after += 1
                    if after == 2:
                        break
            self.assertEqual(tuned.phase, "tuned", tuned.decision)
        finally:
            tuned.close()

    def test_iterable_splits_shards_by_rank_then_worker(self):
        rows, labels = self.h5_source()
        seen = []
        per_rank = []
        for rank in (0, 1):
            stream = data.open(self.p("h5-tar-shards"), iterable=True, rank=rank, world_size=2)
            items = loader_items(stream, workers=2)
            self.assertEqual(len(items), len(stream))
            per_rank.append(set(s for s, _ in items))
            seen.extend(items)
        self.assertEqual(per_rank[0] & per_rank[1], set())  # no sample read by both ranks
        self.assertEqual(sorted(seen), sorted(zip(rows, labels)))  # every sample, once, with its label
        shards = len(data.open(self.p("h5-tar-shards"), iterable=True).shards)
        self.assertGreaterEqual(shards, 4)
        # Rank 1 of 2 with 2 workers: worker 0 reads shards 1, 5, 9...; worker 1 reads 3, 7, ...
        stream = data.open(self.p("h5-tar-shards"), iterable=True, rank=1, world_size=2)
        self.assertEqual(stream.shards, list(range(1, shards, 2)))

    def test_errors_say_what_to_do(self):
        with self.assertRaisesRegex(data.DataError, "no such folder"):
            data.open(self.p("nothing-here"))
        with self.assertRaisesRegex(data.DataError, "no feedtune-dataset.json, so not a dataset"):
            data.open(self.p("jpeg"))
        os.makedirs(self.p("stopped"))
        with open(self.p("stopped/convert-state.json"), "w") as f:
            f.write("{}")
        with self.assertRaisesRegex(data.DataError, "an interrupted convert .*--resume to finish it"):
            data.open(self.p("stopped"))
        with self.assertRaisesRegex(data.DataError, r"decode=True decodes JPEG samples \(or raw pixels, convert "
                                                    r"--pixels\), and this dataset's samples are 'bin'"):
            data.open(self.p("h5-npy"), decode=True)
        with self.assertRaisesRegex(data.DataError, "iterable=True streams tar shards, and this dataset is hdf5"):
            data.open(self.p("h5-hdf5"), iterable=True)



class FetchThreads(unittest.TestCase):
    """get_many keeps exactly the requests in flight it is asked for, also
    after a call that asked for more (one process's pool is not kept larger)."""

    def test_in_flight_is_what_each_call_asks(self):
        import threading
        import time
        from feedtune import objects

        class Counting(objects._Prefix):
            def __init__(self):
                super().__init__("http://counting.invalid/x")
                self.now, self.most, self.want, self.count = 0, 0, 0, threading.Condition()

            def _make_client(self):
                return object()

            def get(self, key, offset=None, size=None):
                # Each request waits (up to 5 s) until as many as asked are in flight, so a busy box that
                # starts the threads late still shows them all at once; a larger pool shows more.
                with self.count:
                    self.now += 1
                    self.most = max(self.most, self.now)
                    self.count.notify_all()
                    self.count.wait_for(lambda: self.now >= self.want, timeout=5)
                time.sleep(0.01)
                with self.count:
                    self.now -= 1
                return key

        store = Counting()
        reads = [("k%d" % i, None, None) for i in range(16)]
        for in_flight in (8, 2, 4, 1, 3):
            store.most, store.want = 0, in_flight
            self.assertEqual(store.get_many(reads, in_flight), [r[0] for r in reads])
            self.assertEqual(store.most, in_flight, "asked for %d in flight" % in_flight)

if __name__ == "__main__":
    unittest.main()
