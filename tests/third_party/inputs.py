"""Random inputs shaped like what each kind of model sees in use.

Pure noise is a poor input for a trained network: a text detector fed uniform noise
answers ~1e-7 everywhere, and a comparison of such outputs checks nothing. These
draw random scenes of the kind the model was trained on, preprocessed the way its
project does it.
"""
from __future__ import annotations

import numpy as np

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])


def _strokes(rng: np.random.Generator, img: np.ndarray, lines: int, height: tuple[int, int]) -> None:
    """Dark glyph-like strokes in words on a light background (NHWC, 0..255, in place)."""
    n, h, w, _ = img.shape
    for b in range(n):
        for _ in range(lines):
            lh = int(rng.integers(*height))
            y = int(rng.integers(0, max(1, h - lh)))
            x = int(rng.integers(0, max(1, w // 2)))
            x_end = int(rng.integers(x + 1, w + 1))
            ink = rng.uniform(0, 80, 3)
            for cx in range(x, x_end, int(rng.integers(3, 7))):
                if rng.random() < 0.15:      # a space between words
                    continue
                top = y + int(rng.integers(0, max(1, lh // 3)))
                img[b, top:y + lh, cx:cx + int(rng.integers(1, 3))] = ink


def _background(rng: np.random.Generator, n: int, h: int, w: int) -> np.ndarray:
    return np.clip(rng.uniform(200, 250, (n, 1, 1, 3)) + rng.normal(0, 6, (n, h, w, 3)), 0, 255)


def document_page(rng: np.random.Generator, n: int, h: int, w: int) -> np.ndarray:
    """A page with lines of text, normalized like PaddleOCR's text detectors (ImageNet mean/std), NCHW."""
    img = _background(rng, n, h, w)
    _strokes(rng, img, lines=max(2, h // 24), height=(8, 18))
    img = (img / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(img.transpose(0, 3, 1, 2), dtype=np.float32)


def text_line(rng: np.random.Generator, n: int, h: int, w: int) -> np.ndarray:
    """A cropped line of text, normalized like PaddleOCR's recognizers and classifiers ((x/255 - 0.5) / 0.5), NCHW."""
    img = _background(rng, n, h, w)
    _strokes(rng, img, lines=1, height=(h * 2 // 3, h - 2))
    img = (img / 255.0 - 0.5) / 0.5
    return np.ascontiguousarray(img.transpose(0, 3, 1, 2), dtype=np.float32)


def photo(rng: np.random.Generator, n: int, h: int, w: int) -> np.ndarray:
    """A scene of random blocks over smooth noise, scaled to 0..1 like YOLO exports expect, NCHW."""
    img = rng.uniform(0, 1, (n, 3, 1, 1)) * np.ones((n, 3, h, w)) + rng.normal(0, 0.05, (n, 3, h, w))
    for b in range(n):
        for _ in range(6):
            y0, x0 = int(rng.integers(0, h - 8)), int(rng.integers(0, w - 8))
            y1, x1 = int(rng.integers(y0 + 8, h + 1)), int(rng.integers(x0 + 8, w + 1))
            img[b, :, y0:y1, x0:x1] = rng.uniform(0, 1, (3, 1, 1))
    return np.clip(img, 0, 1).astype(np.float32)


def speech_like(rng: np.random.Generator, n: int, samples: int, sr: int) -> np.ndarray:
    """Audio in -1..1: noise plus a few voiced harmonic bursts, shape (n, samples)."""
    t = np.arange(samples) / sr
    audio = rng.normal(0, 0.01, (n, samples))
    for b in range(n):
        f0 = rng.uniform(90, 250)
        voiced = sum(rng.uniform(0.05, 0.3) / k * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 6.3))
                     for k in range(1, 8))
        envelope = np.clip(np.sin(np.pi * (t / t[-1]) * rng.uniform(1, 3)), 0, None)
        audio[b] += voiced * envelope
    return np.clip(audio, -1, 1).astype(np.float32)
