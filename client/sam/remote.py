"""`Runner.train` on a login node: the script's folder becomes a SAM job whose entry is the script.

The folder is sent as `sam submit` sends a project (client.upload: only the chunks the server
lacks), with a spec naming the script (`entry: {script, args}`), the config file's keys, the
batch size and the epochs. The job runs the same script in SAM's sandboxes: the compile sandbox
captures its train_step, the data sandbox iterates its train_data_fn(). Followed (the default
for `python train.py`; `sam run` without --wait does not follow), the job's log is printed as it
comes (one line per epoch: mean loss and accuracy), and the result holds every step's loss and
the trained weights, which are loaded into the script's model as well.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import datasets
from .batches import short_batch_problem
from .result import RunnerError, RunResult

if TYPE_CHECKING:
    from .runner import Runner

# Set by `sam run` for the script it starts (docs/runner.md).
WAIT_ENV = "SAM_RUN_WAIT"  # "0": submit and return; anything else: follow the job to its end
SPEC_ENV = "SAM_RUN_SPEC"  # a JSON object of top-level spec keys: name, priority, resources


def script_path() -> Path:
    """The running script (`python train.py`'s train.py)."""
    main = sys.modules.get("__main__")
    name = getattr(main, "__file__", None)
    if not name:
        raise RunnerError(
            "Runner.train submits the running script's folder, but this Python has no script "
            "(an interactive session?); run `python train.py`, or use Runner(local=True)"
        )
    return Path(name).resolve()


def resolved_epochs(
    runner: Runner, epochs: int, steps: int | None, train_data_fn: Any
) -> tuple[int, int]:
    """(num_epochs, steps_per_epoch) of the job: steps_per_epoch given (train() or the config),
    else the length of train_data_fn()."""
    if steps is None:
        loader = train_data_fn()
        try:
            steps = len(loader)
        except TypeError:
            raise RunnerError(
                "train_data_fn() has no len() (an iterable-style data set?); pass "
                "steps_per_epoch= to runner.train so the job knows its length"
            ) from None
        # a wafer step is compiled for one batch shape: a short last batch is refused before
        # anything is sent
        problem = short_batch_problem(loader, runner.batch_size, None)
        if problem:
            raise RunnerError(problem)
    if steps < 1:
        raise RunnerError("train_data_fn() is empty: the job would have no step")
    return int(epochs), int(steps)


def job_spec(
    runner: Runner, script: Path, root: Path, num_epochs: int, steps_per_epoch: int
) -> dict[str, Any]:
    """The spec of the script's job: its entry, the config file's keys, batch size and epochs."""
    from client.cerebras_config import config_sections, merge_config
    from client.errors import JobSpecError

    unnamed = sorted(datasets.asked - set(runner.datasets))
    if unnamed:
        raise RunnerError(
            f"the script reads data set(s) {unnamed} (dataset_path) but the job would not name "
            f"them: pass Runner(..., datasets={unnamed!r})"
        )
    rel = script.relative_to(root).as_posix()
    data: dict[str, Any] = {"batch_size": runner.batch_size}
    if runner.datasets:
        data["datasets"] = list(runner.datasets)
    spec: dict[str, Any] = {
        "name": rel,
        "entry": {"script": rel, "args": list(sys.argv[1:])},
        "data": data,
        "run_options": {"num_epochs": num_epochs, "steps_per_epoch": steps_per_epoch},
    }
    try:
        extra = json.loads(os.environ.get(SPEC_ENV) or "{}")
    except ValueError:
        raise RunnerError(f"{SPEC_ENV} is not a JSON object") from None
    if not isinstance(extra, dict):
        raise RunnerError(f"{SPEC_ENV} is not a JSON object")
    spec.update({k: v for k, v in extra.items() if v is not None})
    source = str(runner.config_path)
    try:
        sections = config_sections(dict(runner.raw_config), source)
        for key in ("num_epochs", "steps_per_epoch"):
            sections.get("run_options", {}).pop(key, None)  # settled by resolved_epochs
        return merge_config(spec, sections, source)
    except JobSpecError as exc:
        raise RunnerError(str(exc)) from None


def train_remotely(
    runner: Runner,
    train_data_fn: Any,
    num_epochs: int,
    train_step_fn: Any,
    steps_per_epoch: int | None,
) -> RunResult:
    """Submit the script's folder as a job; follow it unless SAM_RUN_WAIT=0."""
    from client.config import resolve_config
    from client.errors import SamClientError, SamConnectionError
    from client.sdk import SamClient
    from client.upload import project_listing, with_project

    script = script_path()
    root = script.parent
    epochs, steps = resolved_epochs(runner, num_epochs, steps_per_epoch, train_data_fn)
    spec = job_spec(runner, script, root, epochs, steps)
    wait = runner.wait if runner.wait is not None else os.environ.get(WAIT_ENV, "1") != "0"
    try:
        config = resolve_config()
        with SamClient(config.url, config.token) as client:
            listing = project_listing(script, {})
            spec, _report = with_project(client, spec, listing)
            files = {spec["entry"]["script"]: script.read_text(encoding="utf-8")}
            job = client.submit_job(spec, files, idempotency_key=uuid.uuid4().hex)
            job_id = str(job["id"])
            print(
                f"Submitted job {job_id} ({spec['name']}, {epochs} epochs of {steps} steps) to "
                f"tenant {job.get('tenant', '-')} at {config.url}; logs: sam logs -f {job_id}",
                flush=True,
            )
            if not wait:
                return RunResult(job_id=job_id, state=str(job.get("state") or "queued"))
            return follow(client, job_id, runner)
    except SamConnectionError as exc:
        raise RunnerError(
            f"SAM: {exc}. Set SAM_URL and SAM_TOKEN (or `sam login`) to train on SAM, or "
            "SAM_RUNNER=local (Runner(..., local=True)) to train here"
        ) from exc
    except SamClientError as exc:
        raise RunnerError(f"SAM: {exc}") from exc


def follow(client: Any, job_id: str, runner: Runner) -> RunResult:
    """Print the job's log until it ends; its losses and weights (loaded into runner.model)."""
    from client.errors import SamAPIError, SamConnectionError

    try:
        for event in client.follow_logs(job_id):
            if event.event == "log":
                print(event.data, flush=True)
            elif event.event == "end":
                break
    except (SamConnectionError, SamAPIError) as exc:
        print(f"warning: the log stream broke ({exc}); waiting for the job", file=sys.stderr)
    final = client.wait_for_job(job_id)
    state = str(final.get("state"))
    if state != "succeeded":
        error = final.get("error") or {}
        detail = f": {error.get('kind')}: {error.get('message')}" if error else ""
        raise RunnerError(f"job {job_id} {state}{detail} (`sam logs {job_id}` has its log)")
    metrics = client.metrics(job_id)
    steps = sorted(metrics.get("steps") or [], key=lambda s: int(s["step"]))
    result = RunResult(job_id=job_id, state=state)
    result.losses = [float("nan") if s["loss"] is None else float(s["loss"]) for s in steps]
    result.epoch_losses = [e.get("mean_loss") for e in metrics.get("epochs") or []]
    result.epoch_accuracies = [e.get("accuracy") for e in metrics.get("epochs") or []]
    result.weights = fetch_weights(client, job_id)
    runner.model.load_state_dict(result.weights)
    return result


def fetch_weights(client: Any, job_id: str) -> dict[str, Any]:
    """The job's weights.pt as a state_dict (torch is the script's: it imported it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        raise RunnerError("the script's model is a torch module, but torch is not imported")
    listing = client.artifacts(job_id)
    if not listing.get("weights"):
        raise RunnerError(f"job {job_id} succeeded but left no weights (`sam fetch {job_id}`)")
    with tempfile.TemporaryDirectory(prefix="sam-weights-") as folder:
        path = Path(folder) / "weights.pt"
        client.download(listing["weights"]["url"], path)
        weights: dict[str, Any] = torch.load(path, weights_only=True)
    return weights
