"""Issue 39 target: a masked-word head fitted on MiniLM over <= 20,000 SNLI sentences in <= 15 min on 2 cores,
top-1 on held-out masked whole words >= 1.5x the best constant guess.

    python bench/fit_mlm_head.py [--corpus snli:train:20000] [--limit 20000] [--steps 3000] [--out minilm-mlm]

Prints the fit's JSON (accuracy, the best constant guess on the same held-out words, encode and total seconds) and
the machine's load average before and after. The head is saved under models_cache/heads/OUT, where the
Masked words page and the lens find it (use a throwaway BERTLENS_CACHE to keep it out of your cache)."""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(settings.data_dir() / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--corpus", default="snli:train:20000")
    parser.add_argument("--limit", type=int, default=20000, help="sentences at most (a pair gives two)")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--out", default="minilm-mlm")
    args = parser.parse_args()
    from core.training.mlm_head import fit_mlm_head

    load_before = os.getloadavg()
    started = time.perf_counter()
    fit = fit_mlm_head(args.model, args.corpus, args.out, limit=args.limit, steps=args.steps,
                       progress=lambda done, total, message=None: None)
    print(json.dumps({**fit.to_json(), "wall_seconds": round(time.perf_counter() - started, 1),
                      "load_before": load_before, "load_after": os.getloadavg(), "cpus": os.cpu_count()}, indent=1))


if __name__ == "__main__":
    main()
