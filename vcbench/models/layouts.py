"""Checkpoint layouts: rename tables from PyTorch state-dict keys to Flax variables.

One table per architecture family; a zoo entry picks a family and says where its
tensors sit in the file (`Layout.with_prefixes`). Adding a PVR whose
checkpoint is laid out differently means adding a table here, nothing else.
"""
from __future__ import annotations

from vcbench.models.convert import Layout, Rule

N = r"(\d+)"  # A block index in a source key, referenced as \1, \2 in targets.


def linear(src: str, dst: str) -> list[Rule]:
  return [Rule(rf"{src}\.weight", f"params/{dst}/kernel", "dense"),
          Rule(rf"{src}\.bias", f"params/{dst}/bias")]


def norm(src: str, dst: str) -> list[Rule]:
  return [Rule(rf"{src}\.weight", f"params/{dst}/scale"),
          Rule(rf"{src}\.bias", f"params/{dst}/bias")]


def conv_bn(conv: str, bn: str, dst: str) -> list[Rule]:
  """A bias-free Conv2d + BatchNorm2d pair -> one folded `ConvBN` module."""
  return [Rule(rf"{conv}\.weight", f"params/{dst}/kernel", "conv"),
          Rule(rf"{bn}\.weight", f"params/{dst}/scale"),
          Rule(rf"{bn}\.bias", f"params/{dst}/bias"),
          Rule(rf"{bn}\.running_mean", f"batch_stats/{dst}/mean"),
          Rule(rf"{bn}\.running_var", f"batch_stats/{dst}/var"),
          Rule(rf"{bn}\.num_batches_tracked", None, reason="BatchNorm step counter")]


def drop(pattern: str, reason: str) -> Rule:
  return Rule(pattern, None, reason=reason)


# timm VisionTransformer: VC-1, MAE, MVP and the random ViTs.
TIMM_VIT = Layout(rules=[
    Rule(r"cls_token", "params/cls_token"),
    Rule(r"pos_embed", "params/pos_embed", "posemb"),
    Rule(r"patch_embed\.proj\.weight", "params/patch_embed/kernel", "conv"),
    Rule(r"patch_embed\.proj\.bias", "params/patch_embed/bias"),
    *norm(rf"blocks\.{N}\.norm1", r"blocks_\1/norm1"),
    *linear(rf"blocks\.{N}\.attn\.qkv", r"blocks_\1/attn/qkv"),
    *linear(rf"blocks\.{N}\.attn\.proj", r"blocks_\1/attn/proj"),
    *norm(rf"blocks\.{N}\.norm2", r"blocks_\1/norm2"),
    *linear(rf"blocks\.{N}\.mlp\.fc1", r"blocks_\1/mlp/fc1"),
    *linear(rf"blocks\.{N}\.mlp\.fc2", r"blocks_\1/mlp/fc2"),
    *norm(r"norm", "norm"),
    drop(r"head\..*", "classification head (not part of the representation)"),
    drop(r"fc_norm\..*", "global-pool norm of the fine-tuning head (representation uses CLS)"),
    drop(r"mask_token", "MAE pre-training mask token"),
    drop(r"decoder.*", "MAE pre-training decoder"),
])

_CLIP_TEXT = "CLIP text tower / logit scale (not the image encoder)"

# CLIP visual transformer, OpenAI naming (also open_clip's state dicts).
CLIP_VIT = Layout(rules=[
    Rule(r"class_embedding", "params/cls_token"),
    Rule(r"positional_embedding", "params/pos_embed", "posemb"),
    Rule(r"conv1\.weight", "params/patch_embed/kernel", "conv"),
    *norm(r"ln_pre", "norm_pre"),
    *norm(rf"transformer\.resblocks\.{N}\.ln_1", r"blocks_\1/norm1"),
    Rule(rf"transformer\.resblocks\.{N}\.attn\.in_proj_weight",
         r"params/blocks_\1/attn/qkv/kernel", "dense"),
    Rule(rf"transformer\.resblocks\.{N}\.attn\.in_proj_bias", r"params/blocks_\1/attn/qkv/bias"),
    *linear(rf"transformer\.resblocks\.{N}\.attn\.out_proj", r"blocks_\1/attn/proj"),
    *norm(rf"transformer\.resblocks\.{N}\.ln_2", r"blocks_\1/norm2"),
    *linear(rf"transformer\.resblocks\.{N}\.mlp\.c_fc", r"blocks_\1/mlp/fc1"),
    *linear(rf"transformer\.resblocks\.{N}\.mlp\.c_proj", r"blocks_\1/mlp/fc2"),
    *norm(r"ln_post", "norm"),
    Rule(r"proj", "params/proj"),
], prefixes=("visual.",), outside_reason=_CLIP_TEXT)

_RESNET_STAGES = [
    *conv_bn(rf"layer{N}\.{N}\.conv1", rf"layer{N}\.{N}\.bn1", r"layer\1_\2/conv1"),
    *conv_bn(rf"layer{N}\.{N}\.conv2", rf"layer{N}\.{N}\.bn2", r"layer\1_\2/conv2"),
    *conv_bn(rf"layer{N}\.{N}\.conv3", rf"layer{N}\.{N}\.bn3", r"layer\1_\2/conv3"),
    *conv_bn(rf"layer{N}\.{N}\.downsample\.0", rf"layer{N}\.{N}\.downsample\.1",
             r"layer\1_\2/downsample"),
]

# torchvision ResNet: ImageNet-supervised, MoCo, R3M, VIP.
TORCHVISION_RESNET = Layout(rules=[
    *conv_bn(r"conv1", r"bn1", "conv1"),
    *_RESNET_STAGES,
    drop(r"fc\..*", "classification / projection head (the representation is the pooled "
         "2048-d feature)"),
])

# VIP keeps its Linear(2048, 1024) head: the 1024-d output is VIP's embedding.
VIP_RESNET = TORCHVISION_RESNET.with_rules_first(*linear(r"fc", "fc"))

# CLIP ModifiedResNet.
CLIP_RESNET = Layout(rules=[
    *conv_bn(r"conv1", r"bn1", "conv1"),
    *conv_bn(r"conv2", r"bn2", "conv2"),
    *conv_bn(r"conv3", r"bn3", "conv3"),
    *_RESNET_STAGES,
    Rule(r"attnpool\.positional_embedding", "params/attnpool/positional_embedding"),
    *linear(r"attnpool\.q_proj", "attnpool/q_proj"),
    *linear(r"attnpool\.k_proj", "attnpool/k_proj"),
    *linear(r"attnpool\.v_proj", "attnpool/v_proj"),
    *linear(r"attnpool\.c_proj", "attnpool/c_proj"),
], prefixes=("visual.",), outside_reason=_CLIP_TEXT)

# torchvision MobileNetV2. Block 1 has no expansion conv, so its indices differ.
TORCHVISION_MOBILENET_V2 = Layout(rules=[
    *conv_bn(r"features\.0\.0", r"features\.0\.1", "features_0"),
    *conv_bn(r"features\.1\.conv\.0\.0", r"features\.1\.conv\.0\.1", "features_1/depthwise"),
    *conv_bn(r"features\.1\.conv\.1", r"features\.1\.conv\.2", "features_1/project"),
    *conv_bn(r"features\.18\.0", r"features\.18\.1", "features_18"),
    *conv_bn(rf"features\.{N}\.conv\.0\.0", rf"features\.{N}\.conv\.0\.1", r"features_\1/expand"),
    *conv_bn(rf"features\.{N}\.conv\.1\.0", rf"features\.{N}\.conv\.1\.1",
             r"features_\1/depthwise"),
    *conv_bn(rf"features\.{N}\.conv\.2", rf"features\.{N}\.conv\.3", r"features_\1/project"),
    drop(r"classifier\..*", "ImageNet classifier (the representation is the pooled 1280-d "
         "feature)"),
])


def _retarget(rule: Rule, src_prefix: str, old: str, new: str) -> Rule:
  """`rule` for keys under `src_prefix`, its target's leading `old` replaced by `new`."""
  assert rule.target is not None and rule.target.startswith(old), rule
  return Rule(src_prefix + rule.pattern, new + rule.target[len(old):], rule.transform,
              rule.reason)


# timm's mapping rules only: TIMM_VIT's drops (head, fc_norm, and the very decoder and mask
# token mapped below) have no place in a pre-training file, so any such key is unexpected.
_TIMM_VIT_MAPPED = [r for r in TIMM_VIT.rules if r.target is not None]

# facebookresearch/mae MaskedAutoencoderViT (the whole pre-training model) -> vcbench MAE
# (`models/mae.py`): the encoder under `params/encoder/` with the zoo ViT's names, the decoder
# blocks with timm's block rules under `decoder_blocks_N`. A `checkpoint-*.pth` holds the
# state dict under 'model'; a bare state dict loads too.
MAE_PRETRAIN = Layout(rules=[
    *[_retarget(r, "", "params/", "params/encoder/") for r in _TIMM_VIT_MAPPED],
    Rule(r"mask_token", "params/mask_token"),
    *linear(r"decoder_embed", "decoder_embed"),
    drop(r"decoder_pos_embed", "fixed 2-D sin-cos table, recomputed by the decoder"),
    *[_retarget(r, "decoder_", "params/blocks_", "params/decoder_blocks_")
      for r in _TIMM_VIT_MAPPED if r.target.startswith("params/blocks_")],
    *norm(r"decoder_norm", "decoder_norm"),
    *linear(r"decoder_pred", "decoder_pred"),
], prefixes=("model.", ""), outside_reason="MAE training state (optimiser, scaler, epoch)")
