"""`erase`: fit LEACE on one layer's word vectors for a treebank task, check it, save it, and measure what the rest
of the model loses (core.analyses.layer_knowledge.erasure; the "What each layer knows" page's "Erase a concept")."""

from __future__ import annotations

from core import validation
from core.analyses.layer_knowledge.erasure import ANALYSIS, erase_inputs
from core.analyses.layer_knowledge.tasks import TASK_HELP
from core.commands import add_json_arguments, add_settings_arguments, counted, settings_from_args, stderr_progress
from core.data.corpus import GRAMMAR
from core.model.loading import load_model


def register(subparsers) -> None:
    p = subparsers.add_parser(
        ANALYSIS.command, help=ANALYSIS.summary,
        description=ANALYSIS.summary + " A word's vector is the mean of its word pieces; the eraser is applied to "
        "every piece's vector when the model runs on. Saved as models_cache/erasers/NAME (eraser.safetensors with "
        "proj_left, proj_right, bias; config.json); x' = x - ((x - bias) @ proj_right^T) @ proj_left^T.",
        epilog=GRAMMAR)
    p.add_argument("--model", required=True, help="hub id, local folder or run name (a fine-tuned classification run "
                   "measures its accuracy; a model with a masked-word head, or a head fitted for it, its masked words)")
    p.add_argument("--task", required=True, help=TASK_HELP)
    p.add_argument("--corpus", required=True, help="treebank to fit on: ud[:SPLIT[:N]] (UD English EWT) or a "
                   ".conllu file, e.g. ud:dev:2000")
    p.add_argument("--eval-corpus", required=True, help="held-out treebank the probes and the effect are scored on, "
                   "e.g. ud:test")
    add_settings_arguments(p, ANALYSIS)
    # dest "name": core/__main__.py clears args.out (the JSON file of other commands) on every rank but the first.
    p.add_argument("--out", dest="name", default=None, metavar="NAME",
                   help="name of the saved eraser (models_cache/erasers/NAME); a name already saved is refused "
                   "before any work; left out: MODEL-TASK-LLAYER")
    add_json_arguments(p, 'one JSON object {"name", "path", "layer", "task", "majority", "probe_before", '
                          '"probe_after", "rank", "effect"}')
    p.set_defaults(func=run_erase_command)


def run_erase_command(args) -> int:
    settings = settings_from_args(ANALYSIS, args)  # checked before anything loads
    inputs = erase_inputs(args.task, args.corpus, args.eval_corpus, args.name, settings.seed)
    lm = load_model(args.model)
    result, _ = counted(lambda: ANALYSIS.run_function()(lm, inputs, settings, progress=stderr_progress(args)))
    if args.json:
        validation.dump_json(result.to_json(), None)
        return 0
    print(f"saved {result.name} at {result.path}: {result.task} erased from layer {result.layer} (rank {result.rank})")
    print(f"probe on {result.n_eval} held-out words: before {result.probe_before:.3f}, after "
          f"{result.probe_after:.3f}, majority label {result.majority:.3f}")
    effect = result.effect
    if effect["kind"] == "none":
        print(effect["message"])
    else:
        what = "masked-word top-1" if effect["kind"] == "masked_word" else "accuracy"
        print(f"{what} on {effect['n']}: before {effect['before']:.3f}, after {effect['after']:.3f}, random subspace "
              f"of the same rank {effect['random_control']:.3f}")
    return 0
