"""What a seeds run costs (issue 35): `reproduce STUDY --seeds 0,1,...` against the same seeds as separate
`reproduce STUDY --seed S` commands, and one single run beside them, each a fresh process timed from start to
printed JSON (what a user waits for: Python and torch imports, model load, corpus, the study). The seeds run loads
the model once and imports once; the corpus sample (and any training) is redone per seed by design.

    python bench/seeds.py [--study clark] [--model PATH] [--limit 100] [--seeds 0,1,2]

Prints one JSON object with the seconds, the ratio and the load average (`uptime`) before and after each figure;
it also checks that each per-seed entry equals its separate run. Results go to a temporary BERTLENS_CACHE.
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
MINILM = Path(os.environ.get("BERTLENS_DATA", REPO.parent / "shared" / "data")) / "models" / "all-MiniLM-L6-v2"


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(argv: list[str], cache: str) -> tuple[float, dict, str, str]:
    before = load()
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "core", *argv, "--json", "--quiet"], cwd=REPO, capture_output=True,
                         text=True, check=True, env={**os.environ, "BERTLENS_CACHE": cache}).stdout
    return time.perf_counter() - start, json.loads(out), before, load()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="clark")
    parser.add_argument("--model", default=str(MINILM))
    parser.add_argument("--limit", default="100")
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    common = ["reproduce", args.study, "--model", args.model, "--limit", args.limit]
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as cache:
        together, found, before, after = timed([*common, "--seeds", args.seeds], cache)
        figures = {"seeds run": {"seconds": round(together, 1), "load before": before, "load after": after}}
        separate = 0.0
        for seed, entry in zip(seeds, found["per_seed"]):
            seconds, single, before, after = timed([*common, "--seed", str(seed)], cache)
            assert single == entry, f"seed {seed}: the seeds run's entry differs from its separate run"
            separate += seconds
            figures[f"seed {seed} alone"] = {"seconds": round(seconds, 1), "load before": before, "load after": after}
    figures["separate runs, total"] = round(separate, 1)
    figures["seeds run / separate runs"] = round(together / separate, 3)
    figures["summary verdict"] = found["summary"]["verdict"]
    print(json.dumps({"study": args.study, "model": args.model, "limit": args.limit, "seeds": seeds, **figures}, indent=1))


if __name__ == "__main__":
    main()
