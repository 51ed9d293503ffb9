"""A user dataset for the probe's serve test (tests/workloads/probe_test.cc):
the factory appends a line to `count_file` each time it is called, so the test
can check that a serving probe builds its dataset once per sweep."""
import os

import torch
import torch.utils.data


class Small(torch.utils.data.Dataset):
    def __init__(self, samples, sample_bytes):
        self.samples = samples
        self.data = torch.arange(sample_bytes, dtype=torch.uint8)

    def __len__(self):
        return self.samples

    def __getitem__(self, index):
        if index < 0 or index >= self.samples:
            raise IndexError(index)
        return self.data + (index % 7)


def make_dataset(count_file, samples=512, sample_bytes=1024):
    with open(count_file, "a") as f:
        f.write("factory %d\n" % os.getpid())
    print("counting_dataset: built")  # a user print: must not break the protocol
    return Small(samples, sample_bytes)
