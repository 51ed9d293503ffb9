"""A JPEG folder the way a torch job reads one: PIL open + convert("RGB") +
torchvision RandomResizedCrop(224), a uint8 HWC tensor per sample (no
ToTensor), in the file order that feedtune's `decode: jpeg` reads (path order).

bench/formats.py uses it in-process; bench/native_vs_torch hands it to the
probe harness as `--dataset jpeg_folder:jpeg_folder --dataset-args '["DIR"]'`.
"""
import glob
import os

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision import transforms

RESIZE = 224


def jpeg_files(root):
    """The files feedtune's decode: jpeg reads, in its order (path order)."""
    found = [p for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
             if p.lower().endswith((".jpg", ".jpeg", ".jpe"))]
    return sorted(found)


class JpegFolder(Dataset):
    """What an ImageFolder with RandomResizedCrop(224) and a uint8 output reads."""

    def __init__(self, files):
        self.files = files
        self.crop = transforms.RandomResizedCrop(RESIZE)  # bilinear, as feedtune's

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with Image.open(self.files[i]) as im:
            img = self.crop(im.convert("RGB"))
        return torch.from_numpy(np.array(img))


def jpeg_folder(root):
    """The probe harness's --dataset factory: every JPEG under root."""
    files = jpeg_files(root)
    if not files:
        raise ValueError(f"{root}: no .jpg/.jpeg/.jpe files under it")
    return JpegFolder(files)
