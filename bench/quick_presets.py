"""The quick presets as a user runs them: the fine-tuning page's quick example (core.training.recipe.QUICK_FINETUNE)
and the bias page's quick demo (core.bias.QUICK_DEMO), each through its command-line twin in a fresh process,
timed from start to printed result. Targets (issue 37): at most 2 minutes each on 2 CPU cores with MiniLM-L6, and
accuracy at least 10 points above the majority baseline (every arm, for the bias demo).

    python bench/quick_presets.py [--only finetune|bias] [--model PATH] [--set KEY=VALUE ...]

--set overrides a preset value for both (e.g. --set lr=2e-4 --set cpu_threads=1) to try other sizes. The wall
time includes what the user waits for: Python and torch imports, model load, tokenizing, training, evaluation,
saving (and for the bias demo three runs, each a process job, and the scorer). Runs are written to a temporary
BERTLENS_CACHE, removed afterwards. The machine's load average (`uptime`) before and after is printed beside
each figure, since a shared machine inflates the time; the figures go in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.bias.experiment import QUICK_DEMO  # noqa: E402
from core.training.recipe import QUICK_FINETUNE, format_layer_set  # noqa: E402

TARGET_SECONDS, TARGET_POINTS = 120.0, 10.0
# Preset keys whose command-line option is not --key-with-dashes: (finetune's, bias's).
FLAGS = {"cpu_threads": ("--threads", "--threads"), "frozen_layers": ("--freeze-layers", None),
         "freeze_layers": ("--freeze-lowest", "--freeze-lowest")}


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def command_line(values: dict, command: str) -> list[str]:
    """The subcommand's options for preset values (Recipe / ExperimentSpec field names)."""
    out = []
    for key, value in values.items():
        flag = FLAGS.get(key, ("--" + key.replace("_", "-"),) * 2)[command == "bias"]
        if isinstance(value, bool):
            out += [flag] if value else []
        elif isinstance(value, (tuple, list)):
            out += [flag, format_layer_set(value)]
        else:
            out += [flag, str(value)]
    return out


def timed_json(args: list[str], cache: str) -> tuple[float, dict]:
    env = {**os.environ, "BERTLENS_CACHE": cache}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "core", *args, "--json"], cwd=REPO, env=env, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"python -m core {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout)


def report(name: str, seconds: float, scores: dict[str, tuple[float, float]], before: str) -> None:
    """scores: arm -> (accuracy, majority accuracy)."""
    print(f"{name}: {seconds:.1f} s (target <= {TARGET_SECONDS:.0f} s: {'met' if seconds <= TARGET_SECONDS else 'missed'}); "
          f"load average (1, 5, 15 min) before {before}, after {load()}")
    for arm, (accuracy, majority) in scores.items():
        points = 100 * (accuracy - majority)
        print(f"  {arm}: accuracy {accuracy:.4f}, majority {majority:.4f}, {points:+.1f} points "
              f"(target >= +{TARGET_POINTS:.0f}: {'met' if points >= TARGET_POINTS else 'missed'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["finetune", "bias"], default=None)
    parser.add_argument("--model", default=str(Path(os.environ.get("BERTLENS_DATA", REPO.parent / "shared" / "data"))
                                               / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a preset value")
    args = parser.parse_args()
    overrides = {k: json.loads(v) for k, _, v in (pair.partition("=") for pair in args.set)}
    print(f"model {args.model}; overrides {overrides or 'none'}")
    with tempfile.TemporaryDirectory(prefix="quick-presets-") as cache:
        if args.only in (None, "finetune"):
            values = {**QUICK_FINETUNE, **overrides}
            print(f"fine-tuning quick example: {values}")
            before = load()
            seconds, metrics = timed_json(["finetune", "--model", args.model, "--run", "quick", "--source", "local",
                                           *command_line(values, "finetune")], cache)
            report("fine-tuning quick example", seconds, {"run": (metrics["accuracy"], metrics["majority_accuracy"])},
                   before)
            print(f"  train {metrics['train_seconds']:.1f} s, eval {metrics['eval_seconds']:.1f} s, "
                  f"degenerate: {metrics['degenerate']['flagged']}")
        if args.only in (None, "bias"):
            values = {**QUICK_DEMO, **{k: v for k, v in overrides.items() if k != "eval_limit"}}
            print(f"bias quick demo: {values}")
            before = load()
            seconds, result = timed_json(["bias", "--model", args.model, *command_line(values, "bias")], cache)
            report("bias quick demo", seconds, {arm: (r["accuracy"], r["degenerate"]["majority_accuracy"])
                                                for arm, r in result["runs"].items()}, before)
            print("  train seconds " + ", ".join(f"{arm} {r['train_seconds']:.1f}" for arm, r in result["runs"].items()))


if __name__ == "__main__":
    main()
