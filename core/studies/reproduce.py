"""The `reproduce` analysis's declaration (core.contract): a study run the paper's way, once or once per seed.

Its inputs are the study's name and core.studies.StudyOptions (model, corpus, limit and the study's own extras,
`--set KEY=VALUE`); its settings, declared here once, are how many times and with which seeds it runs. Light (no
torch): core/views/reproduce.py and `reproduce --list` import it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.contract import Analysis, setting
from core.studies import Study, StudyOptions
from core.studies import seeds as seed_runs


@dataclass(frozen=True)
class ReproduceSettings:
    """What `reproduce` (the CLI), `core.lens.reproduce` and the Reproduce page let a person choose. The page's link
    carries its seeds as the text of its Seeds field (parsed by the view), so the declaration gives them no URL name."""

    seed: int | None = setting(None, "the seed of the corpus sample and of any training (default 0)", type="int",
                               low=0, high=2**31 - 1, url=None)
    seeds: tuple | None = setting(None, "run the study once per seed (e.g. 0,1,2) as one job: every seed's values, "
                                  "their mean, a 95 percent interval and the verdict on the interval (two or more, none "
                                  "negative or repeated: core.studies.seeds.parse_seeds says which)", type="ints",
                                  url=None)
    top_k: int = setting(seed_runs.TOP_K, "with seeds: count the seeds where a head the paper names ranks in the "
                         "top K", low=1, high=10_000, url=None)

    def seed_list(self) -> tuple[int, ...] | None:
        """The seeds checked as `reproduce --seeds` checks them (two or more, none repeated); None for one run.
        ValueError when both one seed and several are given."""
        if self.seeds is None:
            return None
        if self.seed is not None:
            raise ValueError("Give either --seed S (one run) or --seeds S,S,... (one run per seed), not both.")
        return seed_runs.parse_seeds(",".join(map(str, self.seeds)))


def run_study(study: Study, options: StudyOptions, settings: ReproduceSettings, progress=None, should_stop=None):
    """The study once (a StudyResult, with settings.seed, default 0) or once per seed (a SeedsResult)."""
    seed_list = settings.seed_list()
    options = replace(options, seed=settings.seed or 0)
    if seed_list is not None:
        return seed_runs.run_seeds(study, options, seed_list, progress, should_stop, top_k=settings.top_k)
    return study.run(options, progress, should_stop)


ANALYSIS = Analysis(
    name="reproduce", view="reproduce", command="reproduce", lens="reproduce", settings=ReproduceSettings,
    run=run_study, charts=None, title="Reproduce a paper",
    summary="run a paper's protocol and compare with its published numbers",
)
