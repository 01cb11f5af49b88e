"""A tiny run made through wscat.api, as the API tests share it: trained, evaluated, exported."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.tiny import tiny_params, write_params
from wscat import api


def exported_run(work: Path, method: str) -> tuple[Path, Any, Any, Path]:
    """`method` trained for 1 epoch on tiny params in `work`/runs, its core part evaluated and
    the model exported: (params file, TrainResult, EvaluationResult, the entry's NAME.json)."""
    params = write_params(work / "params.yaml", tiny_params(epochs=1))
    run = api.train_method(method, out_dir=work / "runs", params=params, device="cpu")
    result = api.evaluate_checkpoint(run.checkpoint, params=params, device="cpu")
    entry = work / "runs" / f"{method}-digits.json"
    api.export_model(run.checkpoint, result.path, entry)
    return params, run, result, entry
