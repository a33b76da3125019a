"""Encoders (ViT, ResNet, CLIP, MobileNetV2), the zoo of PVRs and checkpoint conversion."""
