"""PyTorch definitions of lockstep's built-in models, layer for layer.

The module index of each layer in nn.Sequential matches lockstep's layer index,
so lockstep's safetensors weights ("layers.<i>.weight") load into
TorchModel(name).load_state_dict(...) with strict=True.
"""
import torch
import torch.nn as nn


class GlobalAvgPool(nn.Module):
    """lockstep's GlobalAvgPool: [N, C, H, W] -> [N, C] (one layer, so indices match)."""

    def forward(self, x):
        return x.mean((2, 3))


class Residual(nn.Module):
    """lockstep's Residual: ReLU(branch(x) + shortcut(x)); an empty shortcut is the identity."""

    def __init__(self, branch, shortcut):
        super().__init__()
        self.branch = nn.Sequential(*branch)
        self.shortcut = nn.Sequential(*shortcut)

    def forward(self, x):
        return torch.relu(self.branch(x) + (self.shortcut(x) if len(self.shortcut) else x))


def conv_bn(i, o, k, s, relu):
    return [nn.Conv2d(i, o, k, s, k // 2, bias=False), nn.BatchNorm2d(o)] + ([nn.ReLU()] if relu else [])


def projection(i, o, s):
    return conv_bn(i, o, 1, s, False) if s != 1 or i != o else []


def resnet_layers(name, in_ch, classes):
    """models/resnet.cpp, layer for layer."""
    if name in ("resnet20", "resnet32", "resnet56"):
        n = {"resnet20": 3, "resnet32": 5, "resnet56": 9}[name]
        out, c = conv_bn(in_ch, 16, 3, 1, True), 16
        for stage in range(3):
            o = 16 << stage
            for b in range(n):
                s = 2 if stage > 0 and b == 0 else 1
                out.append(Residual(conv_bn(c, o, 3, s, True) + conv_bn(o, o, 3, 1, False), projection(c, o, s)))
                c = o
        return out + [GlobalAvgPool(), nn.Linear(c, classes)]
    if name == "resnet50":
        out, c = conv_bn(in_ch, 64, 7, 2, True) + [nn.MaxPool2d(3, 2, 1)], 64
        for stage, blocks in enumerate((3, 4, 6, 3)):
            w = 64 << stage
            for b in range(blocks):
                s = 2 if stage > 0 and b == 0 else 1
                out.append(Residual(conv_bn(c, w, 1, 1, True) + conv_bn(w, w, 3, s, True) + conv_bn(w, 4 * w, 1, 1, False),
                                    projection(c, 4 * w, s)))
                c = 4 * w
        return out + [GlobalAvgPool(), nn.Linear(c, classes)]
    return None


def layers(name, in_ch=1, classes=10, hw=28):
    res = resnet_layers(name, in_ch, classes)
    if res is not None:
        return res
    if name == "mlp":
        return [nn.Flatten(), nn.Linear(in_ch * hw * hw, 256), nn.ReLU(), nn.Linear(256, classes)]
    if name == "lenet":
        s = ((hw - 2) // 2 - 4) // 2
        return [nn.Conv2d(in_ch, 20, 3), nn.ReLU(), nn.AvgPool2d(2),
                nn.Conv2d(20, 50, 5), nn.ReLU(), nn.AvgPool2d(2),
                nn.Flatten(), nn.Linear(50 * s * s, 128), nn.ReLU(), nn.Linear(128, classes)]
    if name == "keras-cnn":
        s = (hw - 4) // 2
        return [nn.Conv2d(in_ch, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
                nn.Linear(64 * s * s, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, classes)]
    if name == "convnet":
        out, c, s = [], in_ch, hw
        for k in (5, 3, 3):
            for _ in range(2):
                out += [nn.Conv2d(c, 128, k, padding=k // 2), nn.ReLU()]
                c = 128
            out.append(nn.MaxPool2d(2))
            s //= 2
        return out + [nn.Flatten(), nn.Linear(128 * s * s, classes)]
    raise ValueError(f"unknown model {name}")


class TorchModel(nn.Module):
    def __init__(self, name, **kw):
        super().__init__()
        self.layers = nn.Sequential(*layers(name, **kw))

    def forward(self, x):
        return self.layers(x)
