"""Small versions of the corpus's exported networks, for the tests (tiny_exports.py writes them).

Each builder has the name of its full-size counterpart in torch_models.py and builds the same
architecture from the same library, with random weights, at a width, depth and input size that
keep the exported file well under a megabyte: the operators and the graph's structure are those
of the full network, the FLOPs are not. torch is imported here, in the export's child process
only. Examples have a batch of 2, so the dynamo exporter keeps the batch dim dynamic too."""
from __future__ import annotations

from typing import Any

import torch

from .exports import TINY_VOCAB
from .torch_models import SEED, Built, _Encoder, _Field, _SegmentationOut

BATCH = 2
SEQUENCE = 16
CLASSES = 10


def _image(size: int = 64) -> tuple[torch.Tensor]:
    return (torch.rand(BATCH, 3, size, size),)


def _tokens(length: int = SEQUENCE) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, TINY_VOCAB, (BATCH, length), generator=generator)
    return ids, torch.ones((BATCH, length), dtype=torch.int64)


def _randomize_norms(model: torch.nn.Module) -> torch.nn.Module:
    """Batch norms of a freshly built network hold mean 0 and variance 1 (the identity); trained
    ones do not, so give them running statistics and affine parameters of a plausible spread."""
    generator = torch.Generator().manual_seed(SEED)
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            module.weight.data.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            module.bias.data.copy_(torch.randn(n, generator=generator) * 0.1)
    return model


def _eval(model: torch.nn.Module) -> torch.nn.Module:
    return _randomize_norms(model).eval()


def _mobilenet_v3_features(width: float, dilated: bool = False) -> tuple[Any, int]:
    from torchvision.models import mobilenetv3
    setting, last_channel = mobilenetv3._mobilenet_v3_conf("mobilenet_v3_large", width_mult=width, dilated=dilated)
    return setting, last_channel


def mobilenet_v3_large() -> Built:
    from torchvision.models.mobilenetv3 import MobileNetV3
    torch.manual_seed(SEED)
    setting, _ = _mobilenet_v3_features(0.125)
    return _eval(MobileNetV3(setting, 128, num_classes=CLASSES)), _image()


def efficientnet_b0() -> Built:
    from torchvision.models import efficientnet
    torch.manual_seed(SEED)
    setting, last_channel = efficientnet._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    return _eval(efficientnet.EfficientNet(setting, dropout=0.2, num_classes=CLASSES, last_channel=last_channel)), _image()


def regnet_y_800mf() -> Built:
    from torchvision.models import regnet
    torch.manual_seed(SEED)
    params = regnet.BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    return _eval(regnet.RegNet(params, num_classes=CLASSES, stem_width=16)), _image()


def convnext_tiny() -> Built:
    from torchvision.models import convnext
    torch.manual_seed(SEED)
    blocks = [convnext.CNBlockConfig(16, 32, 1), convnext.CNBlockConfig(32, 64, 2), convnext.CNBlockConfig(64, None, 1)]
    return convnext.ConvNeXt(blocks, stochastic_depth_prob=0.0, num_classes=CLASSES).eval(), _image()


def vit_b_16() -> Built:
    from torchvision.models.vision_transformer import VisionTransformer
    torch.manual_seed(SEED)
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                              num_classes=CLASSES).eval()
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)   # zero at init (see torch_models.vit_b_16)
    torch.nn.init.normal_(model.heads.head.bias, std=0.02)
    return model, _image(32)


def swin_t() -> Built:
    from torchvision.models.swin_transformer import SwinTransformer
    torch.manual_seed(SEED)
    model = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                            stochastic_depth_prob=0.0, num_classes=CLASSES)
    return model.eval(), _image(64)


def deeplabv3_mobilenet_v3_large() -> Built:
    """DeepLabV3's structure (a dilated MobileNetV3 backbone, ASPP, the head's convolutions, the
    upsampling to the input size) with 16 channels where torchvision's head has 256."""
    from torchvision.models.mobilenetv3 import MobileNetV3
    from torchvision.models.segmentation import deeplabv3
    from torchvision.models._utils import IntermediateLayerGetter
    torch.manual_seed(SEED)
    setting, last_channel = _mobilenet_v3_features(0.125, dilated=True)
    backbone = MobileNetV3(setting, last_channel).features
    out_channels = backbone[-1].out_channels
    backbone = IntermediateLayerGetter(backbone, {str(len(backbone) - 1): "out"})
    head = torch.nn.Sequential(deeplabv3.ASPP(out_channels, [12, 24, 36], out_channels=16),
                               torch.nn.Conv2d(16, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                               torch.nn.ReLU(), torch.nn.Conv2d(16, 4, 1))
    model = deeplabv3.DeepLabV3(backbone, head, None)
    return _SegmentationOut(_eval(model)).eval(), _image(64)


def r2plus1d_18() -> Built:
    """R(2+1)D's stem and residual blocks of (2+1)D convolutions, at 8 and 16 channels, one block
    per stage."""
    from torchvision.models.video import resnet
    torch.manual_seed(SEED)

    def downsample(inplanes: int, planes: int) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Conv3d(inplanes, planes, 1, stride=2, bias=False),
                                   torch.nn.BatchNorm3d(planes))

    stem = torch.nn.Sequential(
        torch.nn.Conv3d(3, 6, kernel_size=(1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3), bias=False),
        torch.nn.BatchNorm3d(6), torch.nn.ReLU(),
        torch.nn.Conv3d(6, 8, kernel_size=(3, 1, 1), padding=(1, 0, 0), bias=False),
        torch.nn.BatchNorm3d(8), torch.nn.ReLU())
    model = torch.nn.Sequential(stem, resnet.BasicBlock(8, 8, resnet.Conv2Plus1D),
                                resnet.BasicBlock(8, 16, resnet.Conv2Plus1D, stride=2, downsample=downsample(8, 16)),
                                torch.nn.AdaptiveAvgPool3d(1), torch.nn.Flatten(), torch.nn.Linear(16, CLASSES))
    return _eval(model), (torch.rand(BATCH, 3, 8, 32, 32),)


# --- transformers ------------------------------------------------------------------------------------------

_LAYERS = dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64)


def bert_base() -> Built:
    import transformers
    torch.manual_seed(SEED)
    config = transformers.BertConfig(vocab_size=TINY_VOCAB, max_position_embeddings=64, **_LAYERS)
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    return _Field(model, "last_hidden_state"), _tokens()


def gpt2() -> Built:
    import transformers
    torch.manual_seed(SEED)
    config = transformers.GPT2Config(vocab_size=TINY_VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    return _Field(model, "logits", use_cache=False), _tokens()


def llama_gqa() -> Built:
    """Grouped-query attention as in torch_models.llama_config: 4 query heads share 2 key/value heads."""
    import transformers
    torch.manual_seed(SEED)
    config = transformers.LlamaConfig(vocab_size=TINY_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                      max_position_embeddings=64, tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(config).eval()
    return _Field(model, "logits", use_cache=False), _tokens()


def t5_encoder() -> Built:
    import transformers
    torch.manual_seed(SEED)
    config = transformers.T5Config(vocab_size=TINY_VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                   relative_attention_num_buckets=16)
    model = transformers.T5EncoderModel(config).eval()
    return _Field(model, "last_hidden_state"), _tokens()


def whisper_tiny_encoder() -> Built:
    """Whisper's encoder at 16 mel bins and 100 frames (the length is fixed by its positions)."""
    import transformers
    torch.manual_seed(SEED)
    config = transformers.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=2, decoder_layers=1,
                                        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                        num_mel_bins=16, max_source_positions=50, vocab_size=TINY_VOCAB,
                                        pad_token_id=0, bos_token_id=1, eos_token_id=1, decoder_start_token_id=2)
    encoder = transformers.WhisperModel(config).get_encoder().eval()
    return _Encoder(encoder), (torch.randn(BATCH, 16, 100),)


def wav2vec2_base() -> Built:
    import transformers
    torch.manual_seed(SEED)
    config = transformers.Wav2Vec2Config(vocab_size=TINY_VOCAB, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2),
                                         conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                                         num_conv_pos_embedding_groups=4, **_LAYERS)
    model = transformers.Wav2Vec2Model(config).eval()
    return _Encoder(model), (torch.randn(BATCH, 1600) * 0.1,)

