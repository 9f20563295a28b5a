"""PyTorch definitions of lockstep's built-in models, layer for layer.

The module index of each layer in nn.Sequential matches lockstep's layer index,
so lockstep's safetensors weights ("layers.<i>.weight") load into
TorchModel(name).load_state_dict(...) with strict=True.
"""
import torch.nn as nn


def layers(name, in_ch=1, classes=10, hw=28):
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
