"""`reproduce`: run a published study's protocol and put the paper's numbers beside the measured ones."""

from __future__ import annotations

import json
import sys

from core import jobs, studies, validation
from core.studies import seeds
from core.studies.reproduce import ANALYSIS, run_study
from core.commands import add_json_arguments, add_settings_arguments, settings_from_args, stderr_progress, warn_degenerate
from core.training.evaluation import Degeneracy


def register(subparsers) -> None:
    p = subparsers.add_parser(
        ANALYSIS.command,
        help=ANALYSIS.summary,
        description="Runs one study (see --list) as a background job with progress (Ctrl-C cancels), then prints the "
        "paper's numbers beside the measured ones with a verdict: reproduced, differs, or different model: shape only.",
    )
    p.add_argument("study", nargs="?", help=f"one of: {', '.join(studies.NAMES)}")
    p.add_argument("--list", action="store_true", help="list the studies with their model, data and expected cost")
    p.add_argument("--model", default=None, help="model to measure (default: the paper's model)")
    p.add_argument("--corpus", default=None, help="corpus spec (default: the study's stand-in for the paper's data)")
    add_settings_arguments(p, ANALYSIS)
    p.add_argument("--limit", type=validation.positive, default=None, help="at most N items (default: the study's own size)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a study-specific option (e.g. --set finetuned=RUN); VALUE is parsed as JSON when it can be")
    add_json_arguments(p)
    p.set_defaults(func=run_reproduce)


def _extra(pairs: list[str]) -> dict:
    extra = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got '{pair}'.")
        try:
            extra[key] = json.loads(value)
        except json.JSONDecodeError:
            extra[key] = value
    return extra


def run_reproduce(args) -> int:
    if args.list:
        listed = [study.to_json() for study in studies.all_studies()]
        if args.json:
            validation.dump_json({"studies": listed}, args.out)
        else:
            for s in listed:
                print(f"{s['name']:<20} {s['model']:<22} {s['data']}  (CPU {s['cost_cpu']}; GPU {s['cost_gpu']})")
        return 0
    if not args.study:
        raise ValueError(f"Name a study ({', '.join(studies.NAMES)}) or pass --list.")
    study = studies.get(args.study)
    settings = settings_from_args(ANALYSIS, args)
    seed_list = settings.seed_list()  # both --seed and --seeds, or repeated seeds: said before any job starts
    options = studies.StudyOptions(model=args.model, corpus=args.corpus, seed=settings.seed or 0, limit=args.limit,
                                   extra=_extra(args.set))

    printer = stderr_progress(args)

    def work(progress, should_stop):
        def report(done: int, total: int, message: str | None = None) -> None:
            progress(done, total, message)
            if printer is not None:
                printer(done, total)

        return run_study(study, options, settings, report, should_stop)

    params = {"study": study.name, **options.to_json()}
    if seed_list is not None:
        params.update(seeds=list(seed_list), top_k=settings.top_k)
    job = jobs.submit("reproduce", params, work, unit="steps")
    if not args.quiet and (not args.json or sys.stderr.isatty()):
        print(f"{study.name}: job {job.id}", file=sys.stderr)
    found = jobs.wait_in_foreground(job)
    for result in (found.per_seed if seed_list is not None else (found,)):
        for run, degenerate in result.degenerate.items():
            warn_degenerate(Degeneracy.from_json(degenerate), run)
    if args.json:
        validation.dump_json(found.to_json(), args.out)
        return 0
    if seed_list is not None:
        _print_seeds(study, found)
        return 0
    result = found
    print(f"{study.title}\nmodel {result.model}, corpus {result.corpus}, protocol {result.protocol}: {result.verdict.upper()}")
    for note in result.notes:
        print(f"  note: {note}")
    for comparison in result.comparisons:
        ref = comparison.reference
        shape = "" if comparison.shape_correlation is None else f", shape r = {comparison.shape_correlation:.2f}"
        print(f"\n{ref.title} [{comparison.verdict}{shape}]\n  source: {ref.source}\n  paper: {ref.model}, {ref.corpus}, {ref.unit}")
        if comparison.shape_note:  # what r is computed over and how much it can say (a few points: little)
            print(f"  {comparison.shape_note}")
        print("  key\tpaper\tmeasured\twithin ±tol")
        for row in comparison.rows:
            measured = "—" if row.measured is None else f"{row.measured:.3f}"
            within = "—" if row.within is None else ("yes" if row.within else "no")
            print(f"  {row.key}\t{row.paper:.3f}\t{measured}\t{within} (±{row.tolerance:g})")
    return 0


def _print_seeds(study, found: seeds.SeedsResult) -> None:
    summary = found.summary
    print(f"{study.title}\nmodel {found.model}, seeds {', '.join(map(str, found.seeds))}: "
          f"{summary.verdict.upper()} ({summary.confidence:.0%} {summary.interval} interval over the seeds)")
    print("  reference\tkey\tpaper ±tol\tper seed\tmean [interval]\tverdict")
    for n in summary.numbers:
        values = ", ".join("—" if v is None else f"{v:.3f}" for v in n.values)
        spread = "—" if n.mean is None else f"{n.mean:.3f} [{n.low:.3f}, {n.high:.3f}]"
        print(f"  {n.label}\t{n.key}\t{n.paper:.3f} ±{n.tolerance:g}\t{values}\t{spread}\t{n.verdict}")
    for h in summary.heads:
        ranks = ", ".join("—" if r is None else str(r) for r in h.ranks)
        print(f"  head {h.head} ({h.claim}): rank per seed {ranks} of {h.of}; in the top {h.top_k} in "
              f"{h.in_top_k} of {len(h.ranks)} seeds")
