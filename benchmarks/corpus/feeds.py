"""Inputs for the corpus models: seeded, at the sizes the models run at in use.

A trained network fed pure noise can answer near-constant values, and a comparison of
those checks little; so images are scenes of blocks and strokes, audio has voiced
harmonics, and token ids come from the whole vocabulary. Each builder takes the seeded
generator and returns the arrays; the registry binds shapes and names with
``functools.partial``.
"""
from __future__ import annotations

import numpy as np

Feed = dict[str, np.ndarray]

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
IMAGENET_STD = np.array([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)


def scene(rng: np.random.Generator, n: int, c: int, h: int, w: int) -> np.ndarray:
    """Random blocks over smooth noise in 0..1, NCHW float64."""
    img = rng.uniform(0, 1, (n, c, 1, 1)) * np.ones((n, c, h, w)) + rng.normal(0, 0.05, (n, c, h, w))
    for b in range(n):
        for _ in range(8):
            y0, x0 = int(rng.integers(0, h - 4)), int(rng.integers(0, w - 4))
            y1, x1 = int(rng.integers(y0 + 4, h + 1)), int(rng.integers(x0 + 4, w + 1))
            img[b, :, y0:y1, x0:x1] = rng.uniform(0, 1, (c, 1, 1))
    return np.clip(img, 0, 1)


def text_scene(rng: np.random.Generator, n: int, c: int, h: int, w: int, line_height: tuple[int, int]) -> np.ndarray:
    """Dark strokes grouped in words on a light background, 0..1, NCHW float64."""
    img = np.clip(rng.uniform(0.78, 0.98, (n, 1, 1, 1)) + rng.normal(0, 0.02, (n, c, h, w)), 0, 1)
    for b in range(n):
        for _ in range(max(1, h // (2 * line_height[1]))):
            lh = int(rng.integers(*line_height))
            y = int(rng.integers(0, max(1, h - lh)))
            x = int(rng.integers(0, max(1, w // 3)))
            for cx in range(x, int(rng.integers(x + 1, w + 1)), int(rng.integers(3, 7))):
                if rng.random() < 0.15:   # a space between words
                    continue
                top = y + int(rng.integers(0, max(1, lh // 3)))
                img[b, :, top:y + lh, cx:cx + int(rng.integers(1, 3))] = rng.uniform(0, 0.3)
    return img


def imagenet(rng: np.random.Generator, name: str, shape: tuple[int, int, int, int], nhwc: bool = False) -> Feed:
    """A photo-like image normalised with ImageNet's mean and std (torchvision's models)."""
    n, c, h, w = shape
    img = (scene(rng, n, c, h, w) - IMAGENET_MEAN) / IMAGENET_STD
    return {name: _layout(img, nhwc)}


def unit_image(rng: np.random.Generator, name: str, shape: tuple[int, int, int, int], nhwc: bool = False,
               scale: float = 1.0) -> Feed:
    """A photo-like image in 0..scale (YOLO exports take 0..1, some classifiers 0..255)."""
    n, c, h, w = shape
    return {name: _layout(scene(rng, n, c, h, w) * scale, nhwc)}


def caffe_image(rng: np.random.Generator, name: str, shape: tuple[int, int, int, int], nhwc: bool = False) -> Feed:
    """A photo-like image as Caffe-era models take it: 0..255 less the per-channel (BGR) mean."""
    n, c, h, w = shape
    img = scene(rng, n, c, h, w) * 255 - np.array([104.0, 117.0, 123.0]).reshape(1, 3, 1, 1)
    return {name: _layout(img, nhwc)}


def clip(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> Feed:
    """A video clip (N, C, T, H, W): each frame a scene shifted a little from the one before, normalised."""
    n, c, t, h, w = shape
    frame = scene(rng, n, c, h, w + t)
    frames = np.stack([frame[..., k:k + w] for k in range(t)], axis=2)
    return {name: ((frames - 0.45) / 0.225).astype(np.float32)}


def document(rng: np.random.Generator, name: str, shape: tuple[int, int, int, int]) -> Feed:
    """A page of text lines, normalised like PaddleOCR's detectors (ImageNet mean and std)."""
    img = (text_scene(rng, *shape, line_height=(8, 18)) - IMAGENET_MEAN) / IMAGENET_STD
    return {name: img.astype(np.float32)}


def text_line(rng: np.random.Generator, name: str, shape: tuple[int, int, int, int], centred: bool = True) -> Feed:
    """One cropped line of text: PaddleOCR's recognizers take (x - 0.5) / 0.5, ddddocr's 0..1."""
    n, c, h, w = shape
    img = text_scene(rng, n, c, h, w, line_height=(h * 2 // 3, h - 2))
    return {name: ((img - 0.5) / 0.5 if centred else img).astype(np.float32)}


def speech(rng: np.random.Generator, n: int, samples: int, rate: int = 16000) -> np.ndarray:
    """Audio in -1..1: noise plus voiced harmonic bursts, (n, samples) float32."""
    t = np.arange(samples) / rate
    audio = rng.normal(0, 0.01, (n, samples))
    for b in range(n):
        f0 = rng.uniform(90, 250)
        voiced = sum(rng.uniform(0.05, 0.3) / k * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 6.3))
                     for k in range(1, 8))
        audio[b] += voiced * np.clip(np.sin(np.pi * (t / t[-1]) * rng.uniform(1, 3)), 0, None)
    return np.clip(audio, -1, 1).astype(np.float32)


def audio(rng: np.random.Generator, name: str, shape: tuple[int, int], scale: float = 1.0) -> Feed:
    """Speech-like samples; openWakeWord's front end takes 16-bit sample values as floats."""
    return {name: speech(rng, *shape) * np.float32(scale)}


def silero_chunk(rng: np.random.Generator, samples: int, with_rate: bool) -> Feed:
    """One streaming chunk for silero VAD (16 kHz) with a state from earlier chunks."""
    feed = {"input": speech(rng, 1, samples), "state": rng.normal(0, 0.3, (2, 1, 128)).astype(np.float32)}
    if with_rate:
        feed["sr"] = np.array(16000, np.int64)
    return feed


def silero_sequence(rng: np.random.Generator, chunks: int) -> Feed:
    """silero's sequence export: ``chunks`` windows of 576 samples (64 of context + 512) and its LSTM state."""
    return {"input": speech(rng, chunks, 576), "h": rng.normal(0, 0.3, (1, 1, 128)).astype(np.float32),
            "c": rng.normal(0, 0.3, (1, 1, 128)).astype(np.float32)}


def features(rng: np.random.Generator, name: str, shape: tuple[int, ...], scale: float = 1.0) -> Feed:
    """Real-valued features (mel frames, embeddings), normal with the given scale."""
    return {name: (rng.normal(0, scale, shape)).astype(np.float32)}


def file_bytes(rng: np.random.Generator, name: str, length: int) -> Feed:
    """magika's input: a file's first and last bytes as int32, 256 padding the short ones."""
    content = rng.integers(32, 127, length - 300).astype(np.int32)   # text-like
    padded = np.concatenate([content, np.full(300, 256, np.int32)])
    return {name: padded.reshape(1, length)}


def tokens(rng: np.random.Generator, names: tuple[str, ...], batch: int, length: int, vocab: int) -> Feed:
    """Token ids, and for each further name an attention mask of ones (int64)."""
    feed = {names[0]: rng.integers(0, vocab, (batch, length)).astype(np.int64)}
    for extra in names[1:]:
        feed[extra] = np.ones((batch, length), np.int64)
    return feed


def _layout(img: np.ndarray, nhwc: bool) -> np.ndarray:
    return np.ascontiguousarray(img.transpose(0, 2, 3, 1) if nhwc else img, dtype=np.float32)


def decoder_step(rng: np.random.Generator, layers: int, kv_heads: int, head_dim: int, past: int, vocab: int) -> Feed:
    """One generation step of a decoder with ``past`` cached tokens: the new token, the attention
    mask over all of them, its position, and key/value caches of a plausible scale."""
    feed = {"input_ids": rng.integers(0, vocab, (1, 1)).astype(np.int64),
            "attention_mask": np.ones((1, past + 1), np.int64),
            "position_ids": np.full((1, 1), past, np.int64)}
    for layer in range(layers):
        for kind in ("key", "value"):
            feed[f"past_key_values.{layer}.{kind}"] = rng.normal(0, 1, (1, kv_heads, past, head_dim)).astype(np.float32)
    return feed
