#!/usr/bin/env python3
"""A real CPU training job for feedtune to tune: a small CNN trained in the
main process (one intra-op thread, as on a box whose other cores feed it),
over synthetic images that get real CPU augmentation in the DataLoader's
workers (random crop, flip, brightness jitter, a small rotation, a blur,
normalisation).

The core is the last five lines: the dataset, the step, and serve(). Sweep it
with a command workload, e.g.

    workload: {kind: command, protocol: serve, argv: [/usr/bin/python3, examples/tune_cnn.py]}
    loader: {batch_size: 32}

or run one trial by hand (protocol run, the probe's options):

    PYTHONPATH=python python3 examples/tune_cnn.py --num-workers 2 --seconds 2
"""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# From the checkout without installing: the package is at <repo>/python.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
from feedtune import serve  # noqa: E402

IMAGES = int(os.environ.get("TUNE_CNN_IMAGES", "2048"))
BLUR = torch.full((3, 1, 5, 5), 1.0 / 25)  # a 5x5 box blur per channel: real CPU per sample
MEAN, STD = torch.tensor([0.5, 0.5, 0.5]).view(3, 1, 1), torch.tensor([0.25, 0.25, 0.25]).view(3, 1, 1)


class AugmentedImages(torch.utils.data.Dataset):
    """IMAGES 3x72x72 uint8 images (made once, shared with forked workers),
    each augmented on the fly to a normalised 3x64x64 float tensor."""

    def __init__(self, n=IMAGES):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (n, 3, 72, 72), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        top, left = torch.randint(0, 9, (2,)).tolist()
        x = self.images[i, :, top:top + 64, left:left + 64].float() / 255.0
        if torch.rand(()) < 0.5:
            x = x.flip(2)
        x = (x * (0.8 + 0.4 * torch.rand(()))).clamp(0.0, 1.0).unsqueeze(0)
        angle = (torch.rand(()) - 0.5) * 0.5  # a rotation of up to +-14 degrees, bilinear
        c, s = torch.cos(angle), torch.sin(angle)
        theta = torch.stack([torch.stack([c, -s, torch.zeros(())]), torch.stack([s, c, torch.zeros(())])])
        grid = F.affine_grid(theta.unsqueeze(0), list(x.shape), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)
        x = F.conv2d(x, BLUR, padding=2, groups=3).squeeze(0)
        return (x - MEAN) / STD, self.labels[i]


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 16 * 16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))  # 8 x 32 x 32
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 16 x 16 x 16
        return self.fc(x.flatten(1))


torch.set_num_threads(1)  # the model's share of the box: one core; the rest feed it
model = SmallCnn()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def train_step(batch):
    images, labels = batch
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()  # syncs, as a loop that logs its loss does


if __name__ == "__main__":
    serve(dataset=AugmentedImages, step=train_step, batch_size=32)
