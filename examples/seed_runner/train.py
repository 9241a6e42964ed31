"""The seed's train.py (its section 3.1) with only the runner import changed: `from sam import
Runner`. `python train.py` (SAM_URL/SAM_TOKEN set) or `sam run --wait train.py` trains it on a
wafer; SAM_RUNNER=local trains it here in eager PyTorch (docs/runner.md)."""

import torch
import torch.nn as nn
from data_utils import DigitsDataset
from model import DigitNet
from torch.utils.data import DataLoader

from sam import Runner

torch.manual_seed(0)
model = DigitNet(channels=8, num_classes=10)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)


def train_step(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    outputs = model(inputs)
    # two weighted losses: the classification and a small penalty on the logits' size
    loss = 0.9 * criterion(outputs, labels) + 0.1 * outputs.pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return loss


runner = Runner(
    model=model,
    loss_fn=criterion,
    optimizer=optimizer,
    scheduler=scheduler,
    config_path="./configs/cerebras_config.yaml",
)
dataset = DigitsDataset()
result = runner.train(
    train_data_fn=lambda: DataLoader(dataset, batch_size=runner.batch_size),
    num_epochs=2,
    train_step_fn=train_step,
)
if result.losses:  # not when submitted without waiting (`sam run` without --wait)
    print(f"final loss {result.final_loss:.4f}")
