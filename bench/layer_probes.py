"""Label probes per layer (issue 49): every layer of MiniLM-L6 on UD EWT, as `python -m core probe-labels` runs them.

    nice python bench/layer_probes.py [--model PATH] [--train ud:dev:2000] [--eval ud:test:all] [--threads 2]

One run of upos with --control and --mdl (timed: the issue's budget is 5 min on 2 cores), then deprel without
either (its expected layer). Wall time and this process's CPU time are both printed: the machine is shared, so
the wall time of a loaded run overstates what 2 free cores take (CPU seconds / 2 is the floor). Prints each run's JSON line with its wall time and `/proc/loadavg` before and after;
figures go in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(REPO.parent / "shared" / "data" / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--train", default="ud:dev:2000")
    parser.add_argument("--eval", default="ud:test:all")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from core.analyses import probe as probes
    from core.analyses.layer_knowledge.probes import ANALYSIS, run_label_probes
    from core.model.loading import load_model

    lm = load_model(args.model)
    for task, extra in (("upos", {"control": True, "mdl": True}), ("deprel", {})):
        settings = ANALYSIS.make({"task": task, **extra})
        before = loadavg()
        start, cpu_start = time.perf_counter(), time.process_time()
        data = probes.probe_inputs(args.train, args.eval, settings.seed)
        result = run_label_probes(lm, data, settings)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        print(json.dumps({"task": task, **extra, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
                          "loadavg_before": before,
                          "loadavg_after": loadavg(), "n_train_sentences": len(data.train),
                          "n_eval_sentences": len(data.eval), "result": result.to_json()}), flush=True)


if __name__ == "__main__":
    main()
