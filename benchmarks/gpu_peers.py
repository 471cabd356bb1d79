#!/usr/bin/env python3
"""lazyjit-bench-gpu's rows in PyTorch on the same GPU: eager and torch.compile, medians of CUDA
event timings, printed as lazyjit-bench-gpu prints them (row,peer,ms,GB/s,TFLOP/s). Also the
device-to-device copy, the bandwidth the elementwise rows are judged against."""
import sys

try:
    import torch
except ImportError as e:
    print(f"no PyTorch: {e}")
    sys.exit(0)
if not torch.cuda.is_available():
    print("no CUDA GPU for PyTorch")
    sys.exit(0)
torch.backends.cuda.matmul.allow_tf32 = False  # f32 products in f32, as lazyjit computes them


def median_ms(f, repeats):
    f()  # a first call compiles (torch.compile) and warms the allocator
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        f()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def data(*shape):
    n = 1
    for d in shape:
        n *= d
    return (torch.rand(n, device="cuda") * 8 - 4).reshape(shape)


def rows():
    n = 1 << 28
    x = data(n)
    yield "copy_2^28", lambda: x.clone(), 2 * 4 * n, 0, False
    yield "ew_simple_2^28", lambda: torch.relu(x * 1.5 + 0.25) * 0.5 + x, 2 * 4 * n, 0, True
    yield "ew_transcendental_2^28", lambda: torch.sigmoid(x) * torch.tanh(x * 0.5 + 1) + x * x, 2 * 4 * n, 0, True
    r = data(16384, 4096)
    yield "softmax_16384x4096", lambda: torch.softmax(r, -1), 2 * 4 * r.numel(), 0, True
    yield "layer_norm_16384x4096", lambda: torch.nn.functional.layer_norm(r, (4096,)), 2 * 4 * r.numel(), 0, True
    m = 2048
    a, b = data(m, m), data(m, m)
    yield "matmul_f32_2048^3", lambda: a @ b, 3 * 4 * m * m, 2 * m**3, False


print(f"# {torch.cuda.get_device_name()}, PyTorch {torch.__version__}")
print("row,peer,ms,GB/s,TFLOP/s")
for name, f, nbytes, flops, compile_too in rows():
    peers = [("eager", f)] + ([("compile", torch.compile(f))] if compile_too else [])
    for peer, g in peers:
        ms = median_ms(g, 10)
        print(f"{name},{peer},{ms:.4f},{nbytes / (ms * 1e6):.0f},{flops / (ms * 1e9):.2f}", flush=True)
