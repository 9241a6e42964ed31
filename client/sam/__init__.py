"""`from sam import Runner`: the seed's train.py programming model on SAM (docs/runner.md).

Importing it needs no torch (the script imports torch itself); `Runner.train` submits the
script's folder to SAM, or trains in eager PyTorch with `local=True` / SAM_RUNNER=local.
"""

from .result import RunnerError, RunResult
from .runner import Runner, dataset_path

__all__ = ["Runner", "RunnerError", "RunResult", "dataset_path"]
