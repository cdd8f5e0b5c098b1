"""Time-lapse overhead (issues 35, 47): seconds spent measuring the frames against seconds spent training, in one run.

    python bench/timelapse.py [--model all-MiniLM-L6-v2] [--examples 2000] [--frames 10] [--batch-size 32]
                              [--max-length 128] [--threads 2] [--probe snli:dev:100]

Fine-tunes --model on --examples seeded SNLI train pairs for one epoch with `--timelapse --frames` (the default
probe set: 100 seeded SNLI dev pairs) and prints what the run itself recorded in timelapse.json: training seconds
(the loop's updates only), measuring seconds (all frames, step 0 included) and their ratio, the issue's "overhead as
a share of training time" (target <= 25 %), plus the seconds of each frame. Both figures come from the same run, so
the load of a shared machine weighs on both; the load average before and after is printed with them. Since issue 47
a frame is one forward pass over the probe pairs (core/training/watch.py). The figures go in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (0: torch default)")
    parser.add_argument("--probe", default=None, help="--timelapse-corpus (default: the task's, snli:dev:100)")
    args = parser.parse_args()
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory() as cache:
        os.environ["BERTLENS_CACHE"] = cache
        from core.training import Recipe, finetune
        from core.training.runs import final_dir
        from core.training.timelapse import read_timelapse

        recipe = Recipe(model=args.model, task="snli", run_name="bench-timelapse", epochs=1, train_limit=args.examples,
                        eval_limit=200, batch_size=args.batch_size, max_length=args.max_length, seed=0,
                        cpu_threads=args.threads or None, data_source="local", timelapse=args.frames,
                        timelapse_corpus=args.probe)
        started = time.perf_counter()
        metrics = finetune(recipe)
        wall = time.perf_counter() - started
        timelapse = read_timelapse(final_dir(recipe.run_name))
    print(json.dumps({
        "model": args.model, "examples": args.examples, "frames": len(timelapse.frames), "steps": metrics["steps"],
        "probe": timelapse.probe, "dev_examples": timelapse.dev_examples, "device": metrics["device"],
        "threads": args.threads, "train_seconds": round(metrics["train_seconds"], 1),
        "measure_seconds": round(timelapse.measure_seconds, 1), "share": round(timelapse.measure_share, 3),
        "frame_seconds": [round(f.measure_seconds, 2) for f in timelapse.frames], "wall_seconds": round(wall, 1),
        "accuracy": metrics["accuracy"], "load_before": load_before, "load_after": os.getloadavg(),
    }, indent=1))


if __name__ == "__main__":
    main()
