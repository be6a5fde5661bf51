"""The PyTorch peer of the benchmark harness: which architecture a .tflite file is (by file stem), and
PyTorch's time for it on CUDA with CUDA graphs, in three precisions.

    torch-fp32   CUDA graph, TF32 off (true fp32, like gpuc-fp32)
    torch-tf32   CUDA graph, PyTorch's TF32 convolutions and matmuls
    torch-fp16   CUDA graph, model in half precision (input cast and output cast to fp32 inside the graph)

Each timed call covers the span gpuc's run_in_place covers: the input already sits in pinned host
memory; copy it to the device, replay the graph, copy the output into pinned host memory, synchronize.
Weights are random (architectures, not checkpoints): a peer row says how fast, never how right.
torch (and timm / transformers for those peers) is imported only when a peer row is asked for.
"""
from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np


class Peer(NamedTuple):
    library: str          # torchvision | timm | transformers
    arch: str             # torchvision / timm model name, or a transformers *ForImageClassification class
    layout: str           # the .tflite input's layout: "nchw" (litert-torch conversions) or "nhwc" (Keras)
    config: tuple = ()    # transformers: (key, value) pairs for the model's config class

    def describe(self) -> str:
        return f"{self.library}:{self.arch}"


# file stem -> its architecture in PyTorch.  One line per model.
PEERS = {
    "mobilenet_v2_224_f32": Peer("torchvision", "mobilenet_v2", "nhwc"),     # Keras MobileNetV2: same layers
    "hf_mobilevit_small": Peer("transformers", "MobileViTForImageClassification", "nchw",
                               (("num_labels", 1000), ("image_size", 256))),  # MobileViTConfig's defaults: small
    "timm_efficientformerv2_s0": Peer("timm", "efficientformerv2_s0", "nchw"),
    "torchvision_resnet50": Peer("torchvision", "resnet50", "nchw"),
    "torchvision_convnext_tiny": Peer("torchvision", "convnext_tiny", "nchw"),
    "torchvision_swin_t": Peer("torchvision", "swin_t", "nchw"),
    "torchvision_efficientnet_b0": Peer("torchvision", "efficientnet_b0", "nchw"),
    "torchvision_mobilenet_v2": Peer("torchvision", "mobilenet_v2", "nchw"),
}
# stems not in PEERS: litert-torch conversions named <library>_<model name> (skeleton.py's file stems)
PREFIXES = {"torchvision_": "torchvision", "timm_": "timm"}

MODES = ("fp32", "tf32", "fp16")


def peer_for(stem: str, extra: dict | None = None) -> Peer | None:
    """The PyTorch peer of the model with this file stem (extra: more stem -> Peer, checked first), or None."""
    for table in (extra or {}), PEERS:
        if stem in table:
            return table[stem]
    for prefix, library in PREFIXES.items():
        if stem.startswith(prefix) and len(stem) > len(prefix):
            return Peer(library, stem[len(prefix):], "nchw")
    return None


def parse_peer(text: str) -> tuple[str, Peer]:
    """'STEM=LIBRARY:ARCH[:nhwc]' (the --peer option) -> (stem, Peer)."""
    stem, sep, spec = text.partition("=")
    parts = spec.split(":")
    if not sep or not stem or len(parts) not in (2, 3) or parts[0] not in ("torchvision", "timm", "transformers") \
            or not parts[1] or (len(parts) == 3 and parts[2] not in ("nchw", "nhwc")):
        raise ValueError(f"--peer {text!r}: expected STEM=LIBRARY:ARCH[:nchw|nhwc], LIBRARY one of "
                         "torchvision, timm, transformers")
    return stem, Peer(parts[0], parts[1], parts[2] if len(parts) == 3 else "nchw")


def torch_input(peer: Peer, x: np.ndarray) -> np.ndarray:
    """The model's (batched) image input as PyTorch takes it: NCHW float32."""
    if x.ndim != 4:
        raise ValueError(f"the peer takes a 4-D image input, this model's is {list(x.shape)}")
    if peer.layout == "nhwc":
        x = x.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(x, dtype=np.float32)


def import_torch():
    """(torch, None), or (None, why not) where torch or CUDA is not there."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any failure to import means: no torch rows here
        return None, f"torch not importable ({type(e).__name__}: {e})"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} has no CUDA device"
    return torch, None


def build(torch, peer: Peer):
    """The peer's architecture with seeded random weights, in eval mode, returning one logits tensor."""
    torch.manual_seed(0)
    if peer.library == "torchvision":
        import torchvision
        return getattr(torchvision.models, peer.arch)(weights=None).eval()
    if peer.library == "timm":
        import timm
        return timm.create_model(peer.arch, pretrained=False).eval()
    if peer.library == "transformers":
        import transformers
        cls = getattr(transformers, peer.arch)
        net = cls(cls.config_class(**dict(peer.config)))

        class Logits(torch.nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, x):
                return self.net(pixel_values=x).logits
        return Logits(net).eval()
    raise ValueError(f"unknown peer library {peer.library!r}")


def graph_call(torch, model, x: np.ndarray, mode: str):
    """A call running `model` (a copy of it, in the mode's precision) on x through a CUDA graph, from pinned
    memory to pinned memory (see the module docstring), and the pinned output it fills."""
    tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    dt = torch.float16 if mode == "fp16" else torch.float32
    net = copy.deepcopy(model).to("cuda", dt).eval()
    pin_in = torch.from_numpy(x).pin_memory()
    x_dev = torch.empty(pin_in.shape, dtype=pin_in.dtype, device="cuda")
    with torch.no_grad():
        side = torch.cuda.Stream()                 # warm-up off the default stream, as graph capture wants
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                x_dev.copy_(pin_in)
                net(x_dev.to(dt))
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y_dev = net(x_dev.to(dt)).float()
    pin_out = torch.empty(y_dev.shape, dtype=torch.float32, pin_memory=True)
    stream = torch.cuda.current_stream()

    def call():
        x_dev.copy_(pin_in, non_blocking=True)
        graph.replay()
        pin_out.copy_(y_dev, non_blocking=True)
        stream.synchronize()
    call.keep = (net, graph, x_dev, y_dev)        # alive as long as the call
    return call, pin_out


def rows(torch, stem: str, peer: Peer, inputs: dict, runs: int, timed) -> list:
    """torch-fp32/-tf32/-fp16 rows for one model.  inputs: batch -> the model's input stacked to that batch
    (as the .tflite takes it); timed: the harness's timing function (same warm-up, same statistics)."""
    base = {"model": stem, "peer": peer.describe()}
    try:
        model = build(torch, peer)
    except Exception as e:  # noqa: BLE001 - a peer that cannot be built is a note, not a crash
        return [{**base, "system": "torch", "note": f"cannot build {peer.describe()}: {type(e).__name__}: {str(e)[:160]}"}]
    device = torch.cuda.get_device_name(0)
    out = []
    for b, x in sorted(inputs.items()):
        for mode in MODES:
            row = {**base, "system": f"torch-{mode}", "batch": b}
            try:
                call, _ = graph_call(torch, model, torch_input(peer, x), mode)
                t = timed(call, runs)
                out.append({**row, "device": device, **t, "images_per_s": b / (t["median_ms"] * 1e-3),
                            "note": "CUDA graph, pinned host memory in and out"})
                del call
            except Exception as e:  # noqa: BLE001
                out.append({**row, "note": f"{type(e).__name__}: {str(e)[:180]}"})
            torch.cuda.empty_cache()
    return out
