"""The exported networks, built with random weights (torch imported here, in the export's
child process only). Each builder returns the module in eval mode and example inputs in the
order of its Architecture's input names. Transformers models are built from configs at the
published sizes of the model they are named after; nothing is downloaded."""
from __future__ import annotations

from typing import Any

import torch

SEED = 0
Built = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


def _image_net(name: str, shape: tuple[int, ...] = (1, 3, 224, 224), **kwargs: Any) -> Built:
    import torchvision
    torch.manual_seed(SEED)
    model = torchvision.models.get_model(name, weights=None, **kwargs).eval()
    return model, (torch.rand(shape),)


def mobilenet_v3_large() -> Built:
    return _image_net("mobilenet_v3_large")


def efficientnet_b0() -> Built:
    return _image_net("efficientnet_b0")


def regnet_y_800mf() -> Built:
    return _image_net("regnet_y_800mf")


def convnext_tiny() -> Built:
    return _image_net("convnext_tiny")


def vit_b_16() -> Built:
    model, example = _image_net("vit_b_16")
    # torchvision starts the classifier head at zero, so every image would give zero logits and
    # the output check would compare nothing; a trained head is not zero
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    torch.nn.init.normal_(model.heads.head.bias, std=0.02)
    return model, example


def swin_t() -> Built:
    return _image_net("swin_t")


class _SegmentationOut(torch.nn.Module):
    """torchvision's segmentation models return a dict; the export takes its ``out``."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)["out"]


def deeplabv3_mobilenet_v3_large() -> Built:
    model, example = _image_net("deeplabv3_mobilenet_v3_large", (1, 3, 520, 520), weights_backbone=None,
                                aux_loss=False)
    return _SegmentationOut(model).eval(), example


def r2plus1d_18() -> Built:
    return _image_net("r2plus1d_18", (1, 3, 16, 112, 112))


# --- transformers ------------------------------------------------------------------------------------------

class _Field(torch.nn.Module):
    """A transformers model called with keyword inputs, returning one field of its output."""

    def __init__(self, model: torch.nn.Module, field: str, **call: Any) -> None:
        super().__init__()
        self.model, self.field, self.call = model, field, call

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        names = ("input_ids", "attention_mask")[:len(inputs)]
        return getattr(self.model(**dict(zip(names, inputs)), **self.call), self.field)


def _tokens(vocab: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, vocab, (1, length), generator=generator)
    return ids, torch.ones((1, length), dtype=torch.int64)


def bert_base() -> Built:
    import transformers
    torch.manual_seed(SEED)
    model = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False).eval()
    return _Field(model, "last_hidden_state"), _tokens(30522, 128)


def gpt2() -> Built:
    import transformers
    torch.manual_seed(SEED)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    return _Field(model, "logits", use_cache=False), _tokens(50257, 64)


def llama_config(layers: int = 6) -> Any:
    """A Llama-style decoder of about 90 M parameters: grouped-query attention (12 query heads
    share 4 key/value heads), RoPE, RMSNorm, SwiGLU, a 32000-token vocabulary."""
    import transformers
    from .exports import HEAD_DIM, KV_HEADS
    return transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                                    num_hidden_layers=layers, num_attention_heads=12, num_key_value_heads=KV_HEADS,
                                    head_dim=HEAD_DIM, max_position_embeddings=2048, tie_word_embeddings=False)


def llama_gqa() -> Built:
    import transformers
    torch.manual_seed(SEED)
    model = transformers.LlamaForCausalLM(llama_config()).eval()
    return _Field(model, "logits", use_cache=False), _tokens(32000, 64)


def t5_encoder() -> Built:
    import transformers
    torch.manual_seed(SEED)
    model = transformers.T5EncoderModel(transformers.T5Config()).eval()   # t5-small's sizes
    return _Field(model, "last_hidden_state"), _tokens(32128, 128)


class _Encoder(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).last_hidden_state


def whisper_tiny_encoder() -> Built:
    import transformers
    torch.manual_seed(SEED)
    config = transformers.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                                        decoder_layers=4, decoder_attention_heads=6, encoder_ffn_dim=1536,
                                        decoder_ffn_dim=1536, num_mel_bins=80)
    encoder = transformers.WhisperModel(config).get_encoder().eval()
    return _Encoder(encoder), (torch.randn(1, 80, 3000),)


def wav2vec2_base() -> Built:
    import transformers
    torch.manual_seed(SEED)
    model = transformers.Wav2Vec2Model(transformers.Wav2Vec2Config()).eval()
    return _Encoder(model), (torch.randn(1, 16000) * 0.1,)


class _DecoderStep(torch.nn.Module):
    """The decoder with its key/value caches as flat tensors in and out (past_key_values.i.key,
    ...; present.i.key, ...), as generation loops bind them."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache
        cache = DynamicCache()
        for layer in range(len(past) // 2):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def llama_gqa_kv() -> Built:
    import transformers
    from .exports import HEAD_DIM, KV_HEADS, KV_LAYERS
    torch.manual_seed(SEED)
    model = transformers.LlamaForCausalLM(llama_config(KV_LAYERS)).eval()
    past_length = 63
    past = tuple(torch.randn(1, KV_HEADS, past_length, HEAD_DIM) for _ in range(2 * KV_LAYERS))
    ids = torch.randint(0, 32000, (1, 1))
    mask = torch.ones((1, past_length + 1), dtype=torch.int64)
    position = torch.full((1, 1), past_length, dtype=torch.int64)
    return _DecoderStep(model).eval(), (ids, mask, position, *past)
