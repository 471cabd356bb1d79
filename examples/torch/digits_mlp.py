"""PyTorch on lazyjit, from Python: the digits MLP as a plain torch.nn.Module with
torch.optim.Adam, trained on device='lazy' after lazyjit_torch.init() and, from the same
initial weights, on the CPU. Prints both test accuracies and lazyjit's metrics; exits 1 if
lazyjit's is below 95% or more than one point from the CPU's.

    PYTHONPATH=build/frontends/torch /usr/bin/python3 examples/torch/digits_mlp.py
"""
import sys

import torch
import torch._lazy
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

import lazyjit_torch


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(64, 128)
        self.output = nn.Linear(128, 10)

    def forward(self, x):
        return self.output(F.relu(self.hidden(x)))


def train(device, x, y, test_x, test_y, epochs=15, batch=64):
    torch.manual_seed(0)
    model = Mlp().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(epochs):
        total, batches = 0.0, 0
        for start in range(0, len(x) - batch + 1, batch):
            opt.zero_grad()
            loss = F.cross_entropy(model(x[start:start + batch].to(device)), y[start:start + batch].to(device))
            loss.backward()
            opt.step()
            if device == 'lazy':
                torch._lazy.mark_step()
            total, batches = total + loss.item(), batches + 1
        print(f"{device:>4} epoch {epoch + 1:2d}: loss {total / batches:.4f}")
    with torch.no_grad():
        predicted = model(test_x.to(device)).argmax(1).cpu()
    return (predicted == test_y).double().mean().item()


def main():
    lazyjit_torch.init()
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    split = int(0.8 * len(x))
    train_rows, test_rows = order[:split], order[split:]
    data = (x[train_rows], y[train_rows], x[test_rows], y[test_rows])
    lazy = train('lazy', *data)
    cpu = train('cpu', *data)
    print(f"\ntest accuracy: lazyjit {100 * lazy:.2f}%, CPU {100 * cpu:.2f}%\n")
    print(lazyjit_torch.metrics_report())
    metrics = lazyjit_torch.metrics()
    ok = lazy >= 0.95 and abs(lazy - cpu) <= 0.01 and metrics['fallback_executions'] == 0
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
