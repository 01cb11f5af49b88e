"""benchmarks/compile_choice.py: the proxy's eager-or-graphs rule, applied as written."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import compile_choice  # noqa: E402

EPOCHS = {"mt": 100, "wscat": 15}


def _result(rows, *, mode=None, failed=(), batch=128):
    return {"rows": [{"method": m, "seconds_per_step": s, "warmup_seconds": w,
                      "compile": mode is not None, "compile_mode": mode, "model": "wrn-16-4",
                      "batch": batch, "precision": "bf16", "channels_last": True,
                      "deterministic": True} for m, s, w in rows],
            "failed": list(failed)}


def test_a_group_trains_with_graphs_only_when_the_run_gets_10_percent_faster():
    eager = _result([("mt", 0.016, 1.0), ("wscat", 0.060, 2.0)])
    # mt: 178.6 s eager against 60 + 88.8 = 148.8 s (-17%); wscat: 101.9 s against 40 + 91.6
    graphs = _result([("mt", 0.008, 60.0), ("wscat", 0.055, 40.0)], mode="reduce-overhead")
    chosen = compile_choice.choose(eager, graphs, EPOCHS)
    assert chosen["mt"][0] and not chosen["wscat"][0]
    assert compile_choice.params_keys(chosen) == [
        "training.cifar10-proxy.per_method.mt: compile: true, compile_mode: reduce-overhead",
        "training.cifar10-proxy.per_method.standard: compile: true, compile_mode: reduce-overhead"]
    # the warm-up counts: the same step time with a long compile is not a win
    slow_start = _result([("mt", 0.008, 120.0)], mode="reduce-overhead")
    assert not compile_choice.choose(eager, slow_start, EPOCHS)["mt"][0]


def test_a_step_that_graphs_refuse_keeps_its_group_eager():
    eager = _result([("mt", 0.016, 1.0), ("wscat", 0.060, 2.0)])
    graphs = _result([("mt", 0.004, 5.0), ("wscat", 0.010, 5.0)], mode="reduce-overhead",
                     failed=["wrn-16-4 trades failed: RuntimeError: overwritten"])
    chosen = compile_choice.choose(eager, graphs, EPOCHS)
    assert chosen["mt"][0] and not chosen["wscat"][0]
    assert "graphs failed for trades" in chosen["wscat"][1]
    missing = _result([("mt", 0.004, 5.0)], mode="reduce-overhead",
                      failed=["wrn-16-4 wscat failed: RuntimeError"])
    assert not compile_choice.choose(eager, missing, EPOCHS)["wscat"][0]


def test_swapped_or_unreadable_files_are_refused_in_one_line(tmp_path):
    eager = tmp_path / "eager.json"
    graphs = tmp_path / "graphs.json"
    eager.write_text(json.dumps(_result([("mt", 0.016, 1.0)])))
    graphs.write_text(json.dumps(_result([("mt", 0.008, 9.0)], mode="reduce-overhead")))
    script = str(Path(compile_choice.__file__))
    ok = subprocess.run([sys.executable, script, "--eager", str(eager), "--graphs", str(graphs)],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "mt+standard: mt:" in ok.stdout
    other_batch = tmp_path / "batch64.json"
    other_batch.write_text(json.dumps(_result([("mt", 0.008, 9.0)], mode="reduce-overhead",
                                              batch=64)))
    old_rows = tmp_path / "old.json"  # written before throughput.py timed its warm-up
    old_rows.write_text(json.dumps({"rows": [{"method": "mt", "seconds_per_step": 0.01}]}))
    odd = []  # timings no measurement gives: zero, negative, NaN, infinite, not a number
    for i, (key, value) in enumerate([("seconds_per_step", 0), ("seconds_per_step", "0.016"),
                                      ("seconds_per_step", None), ("warmup_seconds", -5.0),
                                      ("seconds_per_step", float("nan")),
                                      ("warmup_seconds", float("inf"))]):
        row = _result([("mt", 0.016, 1.0)])
        row["rows"][0][key] = value
        odd.append(tmp_path / f"odd{i}.json")
        odd[-1].write_text(json.dumps(row))  # NaN and Infinity as Python's json writes them
    for a, b in ((graphs, eager), (tmp_path / "missing.json", graphs), (eager, other_batch),
                 (old_rows, graphs), *((bad, graphs) for bad in odd), (eager, odd[3])):
        bad = subprocess.run([sys.executable, script, "--eager", str(a), "--graphs", str(b)],
                             capture_output=True, text=True)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
        assert "Traceback" not in bad.stderr
    margin = subprocess.run([sys.executable, script, "--eager", str(eager), "--graphs",
                             str(graphs), "--margin", "-1"], capture_output=True, text=True)
    assert margin.returncode == 2 and "--margin -1" in margin.stderr


def test_apply_writes_the_chosen_keys_and_nothing_else(tmp_path):
    from wscat.config import load_params, training_for

    params = tmp_path / "params.yaml"
    everything = [m for members in compile_choice.GROUPS.values() for m in members]
    # params.yaml as before any choice (the committed one, if made, undone: the same text then)
    original = compile_choice.with_choice((ROOT / "params.yaml").read_text(), [], everything)
    params.write_text(original)
    eager = tmp_path / "eager.json"
    graphs = tmp_path / "graphs.json"
    eager.write_text(json.dumps(_result([("mt", 0.016, 1.0), ("wscat", 0.060, 2.0)])))
    graphs.write_text(json.dumps(_result([("mt", 0.008, 30.0), ("wscat", 0.059, 30.0)],
                                         mode="reduce-overhead")))
    script = str(Path(compile_choice.__file__))
    run = subprocess.run([sys.executable, script, "--eager", str(eager), "--graphs", str(graphs),
                          "--params", str(params), "--apply"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    loaded = load_params(params)
    for method in ("mt", "standard"):
        schedule = training_for(loaded, "cifar10-proxy", method)
        assert schedule["compile"] and schedule["compile_mode"] == "reduce-overhead"
        assert schedule["epochs"] == 100  # the knobs already there stay
    assert not training_for(loaded, "cifar10-proxy", "wscat")["compile"]
    changed = [(a, b) for a, b in zip(original.splitlines(), params.read_text().splitlines())
               if a != b]
    assert len(changed) == 2 and len(original.splitlines()) == len(params.read_text().splitlines())
    again = subprocess.run([sys.executable, script, "--eager", str(eager), "--graphs", str(graphs),
                            "--params", str(params), "--apply"], capture_output=True, text=True)
    assert again.returncode == 0 and "already holds the choice" in again.stdout
    # a new measurement that keeps the labelers eager takes their keys out again
    graphs.write_text(json.dumps(_result([("mt", 0.016, 30.0), ("wscat", 0.059, 30.0)],
                                         mode="reduce-overhead")))
    undo = subprocess.run([sys.executable, script, "--eager", str(eager), "--graphs", str(graphs),
                           "--params", str(params), "--apply"], capture_output=True, text=True)
    assert undo.returncode == 0 and "nothing (all eager)" in undo.stdout, undo.stderr
    assert params.read_text() == original
    assert compile_choice.with_choice(compile_choice.with_choice(original, ["wscat"]), [],
                                      ["wscat"]) == original  # an entry of its own goes whole
    # a method without an entry gets one; a file not laid out so is left as it was
    text = compile_choice.with_choice(original, ["wscat"])
    assert "      wscat: {compile: true, compile_mode: reduce-overhead}\n" in text
    # a comment with braces after an entry stays a comment
    commented = original.replace("      standard: {epochs: 100}\n",
                                 "      standard: {epochs: 100}  # {was 15}\n")
    assert ("      standard: {epochs: 100, compile: true, compile_mode: reduce-overhead}  # {was 15}"
            in compile_choice.with_choice(commented, ["standard"]))
    block = ("    per_method:\n      mt: {warmup_fraction: 0.0, epochs: 100}\n"
             "      standard: {epochs: 100}\n")
    assert original.count(block) == 1
    flat = original.replace(block, "")  # the proxy without per-method knobs: valid, not ours
    params.write_text(flat)
    graphs.write_text(json.dumps(_result([("mt", 0.004, 1.0)], mode="reduce-overhead")))
    run = subprocess.run([sys.executable, script, "--eager", str(eager), "--graphs", str(graphs),
                          "--params", str(params), "--apply"], capture_output=True, text=True)
    assert run.returncode == 2 and "left as it was" in run.stderr
    assert params.read_text() == flat and list(tmp_path.glob(".params.yaml*")) == []


def test_a_failed_list_that_is_not_lines_is_one_line(tmp_path, capsys, monkeypatch):
    """A 'failed' that is not a list of lines was a TypeError traceback: bad input, one line,
    exit 2."""
    eager = tmp_path / "eager.json"
    eager.write_text(json.dumps(_result([("mt", 0.016, 1.0)])))
    for failed in (3, "wrn-16-4 mt failed", [["nested"]]):
        graphs = tmp_path / "graphs.json"
        graphs.write_text(json.dumps({**_result([("mt", 0.008, 9.0)], mode="reduce-overhead"),
                                      "failed": failed}))
        monkeypatch.setattr(sys, "argv", ["compile_choice.py", "--eager", str(eager), "--graphs",
                                          str(graphs)])
        assert compile_choice.main() == 2
        assert capsys.readouterr() == ("", "compile_choice.py: --graphs: 'failed' is not a list "
                                           "of lines; give the JSON throughput.py wrote\n")
