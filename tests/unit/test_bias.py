"""core.bias on hand-made examples: matching rules, the three training sets, slices, swaps, and scores checked
against plain loops, scikit-learn and scipy."""

from __future__ import annotations

import re

import numpy as np
import pytest

from core.bias import (
    DEFAULT_SWAPS,
    DEFAULT_WORDS,
    ExperimentResult,
    ExperimentSpec,
    bootstrap_accuracy_ci,
    control_keep,
    counterfactuals,
    highlight,
    match_case,
    match_mask,
    paired_difference_ci,
    parse_swaps,
    parse_words,
    score_experiment,
    slice_scores,
    swap_targets,
    swap_text,
    training_sets,
    word_matches,
)
from core.data.datasets import Example


def ex(a: str, b: str | None = None, label: str = "entailment") -> Example:
    return Example(a, b, label)


# ---- matching ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("A woman is walking.", True),
        ("Woman walks.", True),
        ("WOMAN walks.", True),
        ("The woman's hat is red.", True),
        ("Two women-only teams.", True),
        ("Womanhood is a theme.", False),
        ("A superwoman flies.", False),
        ("A man walks.", False),
        ("The girls play.", True),
        ("The girlish laugh.", False),
        ("His mother-in-law smiled.", True),
        ("female_runner", False),  # underscore is part of a word
        ("", False),
    ],
)
def test_matching_is_whole_word_and_case_insensitive(text, expected):
    assert bool(match_mask([ex(text)], DEFAULT_WORDS)[0]) is expected


def test_matching_looks_at_premise_and_hypothesis():
    examples = [ex("A man sits.", "A woman sits."), ex("A woman sits.", "A man sits."), ex("A man sits.", "He sits.")]
    assert match_mask(examples, ["woman"]).tolist() == [True, True, False]


def test_match_mask_equals_a_plain_token_loop():
    rng = np.random.default_rng(1)
    vocab = ["a", "woman", "Women", "man", "GIRL", "womanhood", "mother's", "wife,", "dog", "female."]
    examples = [ex(" ".join(rng.choice(vocab, 5)), " ".join(rng.choice(vocab, 4))) for _ in range(200)]
    words = set(DEFAULT_WORDS)

    def loop(e):
        tokens = re.findall(r"\w+", f"{e.text} {e.text_b}".lower())
        return any(t in words for t in tokens)

    assert match_mask(examples, DEFAULT_WORDS).tolist() == [loop(e) for e in examples]


def test_word_matches_counts_each_word():
    examples = [ex("A woman and a girl.", "A mother."), ex("Girls run.", "girls"), ex("A dog.", "A cat.")]
    m = word_matches(examples, ["woman", "girl", "girls", "mother"])
    assert m.per_word == {"woman": 1, "girl": 1, "girls": 1, "mother": 1}
    assert m.count == 2 and m.n == 3


def test_parse_words_cleans_and_rejects():
    assert parse_words("Women, woman\n girl  girl") == ("women", "woman", "girl")
    with pytest.raises(ValueError, match="empty"):
        parse_words(" , ")
    with pytest.raises(ValueError, match="'wo man!'|not a word"):
        parse_words(["wo man!"])


def test_highlight_bolds_whole_words_only():
    assert highlight("Woman and womanhood", ["woman"]) == "**Woman** and womanhood"
    # The rest of the text is escaped: a premise holding Markdown stays text (core.safe_text).
    # (the invisible word joiner after "http" keeps Streamlit from making the address a link)
    assert highlight("![x](http://192.0.2.1/x.png) woman", ["woman"]) == (
        "\\!\\[x\\]\\(http\u2060\\:\\/\\/192\\.0\\.2\\.1\\/x\\.png\\) **woman**")


# ---- training sets and slices -----------------------------------------------------------------------


def make_train(n=200, seed=0):
    rng = np.random.default_rng(seed)
    subjects = ["A woman", "A man", "The girls", "Two boys", "A dog", "My wife"]
    return [ex(f"{rng.choice(subjects)} runs {i}.", "Someone moves.", ["entailment", "neutral", "contradiction"][i % 3])
            for i in range(n)]


def test_control_removes_exactly_as_many_as_the_filter():
    train = make_train()
    sets = training_sets(train, DEFAULT_WORDS, seed=3)
    removed = sum(1 for e in train if re.search(r"\b(woman|girls|wife)\b", e.text, re.I))
    assert sets.removed == removed > 0
    assert len(sets.biased) == len(sets.control) == len(train) - removed
    assert len(sets.full) == len(train)
    assert not match_mask(sets.biased, DEFAULT_WORDS).any()
    # the control draws from all examples: some of what it drops are non-matching ones, so it keeps some matches
    assert match_mask(sets.control, DEFAULT_WORDS).sum() > 0
    assert len(set(sets.control_kept.tolist())) == len(sets.control_kept)
    assert list(sets.control) == [train[i] for i in sorted(sets.control_kept)]


def test_control_is_seeded_and_uniform():
    assert control_keep(50, 20, seed=1).tolist() == control_keep(50, 20, seed=1).tolist()
    assert control_keep(50, 20, seed=1).tolist() != control_keep(50, 20, seed=2).tolist()
    dropped = np.zeros(10)
    for seed in range(2000):
        keep = control_keep(10, 3, seed)
        dropped[np.setdiff1d(np.arange(10), keep)] += 1
    # each index is dropped with probability 3/10
    np.testing.assert_allclose(dropped / 2000, 0.3, atol=0.04)
    with pytest.raises(ValueError):
        control_keep(5, 6, 0)


def test_all_matching_training_set_is_refused():
    with pytest.raises(ValueError, match="biased set would be empty"):
        training_sets([ex("A woman."), ex("A girl.")], DEFAULT_WORDS)


def test_slices_partition_the_test_set():
    test = make_train(120, seed=5)
    with_words = match_mask(test, DEFAULT_WORDS)
    true = np.array([i % 3 for i in range(120)])
    predicted = np.roll(true, 7)
    result = score_experiment("x", ("entailment", "neutral", "contradiction"), true, with_words,
                              {"full": predicted}, {"full": np.zeros(0, int)}, np.zeros(0, int), {"full": 120}, 0)
    run = result.runs["full"]
    assert run.slices["with_words"].n + run.slices["without_words"].n == 120
    assert run.slices["with_words"].n == int(with_words.sum()) == result.test_with_words
    total_confusion = run.slices["with_words"].confusion + run.slices["without_words"].confusion
    np.testing.assert_array_equal(total_confusion, run.overall.confusion)
    correct = true == predicted
    assert run.slices["with_words"].accuracy == pytest.approx(correct[with_words].mean())
    assert run.slices["without_words"].accuracy == pytest.approx(correct[~with_words].mean())


# ---- swaps ------------------------------------------------------------------------------------------


def test_swap_list_is_symmetric():
    targets = swap_targets(DEFAULT_SWAPS)
    for a, b in DEFAULT_SWAPS:
        assert b in targets[a] and a in targets[b]
    two = {w: t for w, t in targets.items() if len(t) > 1}
    assert two == {"her": ("his", "him")}
    for a, b in DEFAULT_SWAPS:
        if a != "her":
            assert swap_text(a, DEFAULT_SWAPS) == b, a
            assert swap_text(swap_text(a, DEFAULT_SWAPS), DEFAULT_SWAPS) == a, a
        assert swap_text(b, DEFAULT_SWAPS) == (a if b not in ("his", "him") else "her")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("A woman talks to a man.", "A man talks to a woman."),
        ("Woman and MAN", "Man and WOMAN"),
        ("WOMEN", "MEN"),
        ("She gives her dog to him.", "He gives his dog to her."),
        ("He hands her a cup.", "She hands him a cup."),
        ("The boy hugs her.", "The girl hugs him."),
        ("Her mother's hat", "His father's hat"),
        ("Womanhood and mankind stay.", "Womanhood and mankind stay."),
        ("The ladies and a gentleman", "The gentlemen and a lady"),
    ],
)
def test_swap_text_keeps_capitalisation_and_swaps_both_ways(text, expected):
    assert swap_text(text, DEFAULT_SWAPS) == expected


def test_match_case():
    assert match_case("Woman", "man") == "Man"
    assert match_case("WOMAN", "man") == "MAN"
    assert match_case("woman", "man") == "man"
    assert match_case("He", "she") == "She"


def test_parse_swaps_round_trip_and_errors():
    assert parse_swaps("woman = man\nGirl <-> boy\n\nshe, he") == (("woman", "man"), ("girl", "boy"), ("she", "he"))
    with pytest.raises(ValueError, match="line 1"):
        parse_swaps("woman man boy")
    with pytest.raises(ValueError, match="itself"):
        parse_swaps("man = Man")
    with pytest.raises(ValueError, match="at most two"):
        parse_swaps("her = his\nher = him\nher = them")


def test_counterfactuals_keep_only_changed_examples():
    test = [ex("A woman sits.", "A person sits."), ex("A dog runs.", "An animal runs."), ex("A cat.", "He sleeps.")]
    cf = counterfactuals(test, DEFAULT_SWAPS)
    assert cf.indices.tolist() == [0, 2]
    assert cf.examples[0] == ex("A man sits.", "A person sits.") and cf.examples[1].text_b == "She sleeps."


# ---- scores -----------------------------------------------------------------------------------------


def test_bootstrap_ci_matches_index_resampling_and_scipy():
    from scipy.stats import bootstrap

    rng = np.random.default_rng(0)
    correct = rng.random(400) < 0.7
    low, high = bootstrap_accuracy_ci(correct, n_boot=4000, seed=1)
    assert low < correct.mean() < high
    # plain index resampling, the textbook definition
    resampled = np.array([correct[rng.integers(0, 400, 400)].mean() for _ in range(4000)])
    loop_low, loop_high = np.percentile(resampled, [2.5, 97.5])
    assert low == pytest.approx(loop_low, abs=0.012) and high == pytest.approx(loop_high, abs=0.012)
    scipy_ci = bootstrap((correct.astype(float),), np.mean, n_resamples=4000, method="percentile", random_state=2).confidence_interval
    assert low == pytest.approx(scipy_ci.low, abs=0.012) and high == pytest.approx(scipy_ci.high, abs=0.012)
    assert bootstrap_accuracy_ci(correct, seed=5) == bootstrap_accuracy_ci(correct, seed=5)


def test_paired_difference_ci_matches_index_resampling():
    rng = np.random.default_rng(3)
    a = rng.random(300) < 0.8
    b = np.where(rng.random(300) < 0.8, a, ~a)
    diff, low, high = paired_difference_ci(a, b, n_boot=4000, seed=0)
    assert diff == pytest.approx(a.mean() - b.mean())
    idx = rng.integers(0, 300, (4000, 300))
    loop = a[idx].mean(1) - b[idx].mean(1)
    assert low == pytest.approx(np.percentile(loop, 2.5), abs=0.012)
    assert high == pytest.approx(np.percentile(loop, 97.5), abs=0.012)


def test_slice_scores_match_sklearn():
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    rng = np.random.default_rng(7)
    true = rng.integers(0, 3, 150)
    predicted = np.where(rng.random(150) < 0.6, true, rng.integers(0, 3, 150))
    s = slice_scores(true, predicted, 3)
    assert s.accuracy == pytest.approx(accuracy_score(true, predicted))
    np.testing.assert_allclose(s.per_class_f1, f1_score(true, predicted, average=None, labels=[0, 1, 2]))
    assert s.macro_f1 == pytest.approx(f1_score(true, predicted, average="macro"))
    np.testing.assert_array_equal(s.confusion, confusion_matrix(true, predicted, labels=[0, 1, 2]))


def test_flip_rate_and_json_round_trip():
    labels = ("entailment", "neutral", "contradiction")
    true = np.array([0, 1, 2, 0, 1, 2])
    with_words = np.array([True, True, False, False, False, False])
    predictions = {"full": np.array([0, 1, 2, 0, 1, 1]), "biased": np.array([0, 0, 2, 0, 2, 2]),
                   "control": np.array([1, 1, 2, 0, 1, 2])}
    swapped_at = np.array([0, 1, 4])
    swapped = {"full": np.array([0, 2, 1]), "biased": np.array([1, 1, 1]), "control": np.array([1, 1, 1])}
    result = score_experiment("exp", labels, true, with_words, predictions, swapped, swapped_at,
                              {"full": 6, "biased": 4, "control": 4}, 2, n_boot=200)
    assert result.runs["full"].flips == 1 and result.runs["full"].flip_rate == pytest.approx(1 / 3)
    assert result.runs["biased"].flips == 3  # 0->1, 0->1, 2->1
    assert result.runs["control"].flips == 0 and result.runs["control"].flip_rate == 0.0
    assert result.differences["biased-full"]["overall"][0] == pytest.approx(4 / 6 - 5 / 6)
    again = ExperimentResult.from_json(result.to_json())
    assert again.to_json() == result.to_json()
    d = result.to_json()
    assert set(d["runs"]) == {"full", "biased", "control"} and d["removed"] == 2
    for run in d["runs"].values():
        assert set(run["slices"]) == {"with_words", "without_words"}
        assert {"accuracy", "n", "ci"} <= set(run["slices"]["with_words"])


def test_spec_validation_names_the_problem():
    with pytest.raises(ValueError, match="experiment name"):
        ExperimentSpec(name="bad name", model="m")
    with pytest.raises(ValueError, match="task"):
        ExperimentSpec(name="x", model="m", task="drugs")
    with pytest.raises(ValueError, match="epochs"):
        ExperimentSpec(name="x", model="m", epochs=0)
    spec = ExperimentSpec(name="x", model="m", words="Woman, girl")
    assert spec.words == ("woman", "girl")
    assert ExperimentSpec.from_json(spec.to_json()) == spec


# ---- experiment state, derived from the runs and the job ------------------------------------------


def test_derive_state_from_runs_and_job():
    from types import SimpleNamespace

    from core.bias import derive_state
    from core.jobs import JobRecord

    def run(name, state, error=None):
        return SimpleNamespace(name=name, state=state, error=error)

    def job(state, error=None):
        return JobRecord("j", "bias", {}, state, error=error)

    queued = {"full": run("x-full", "done"), "biased": run("x-biased", "running"), "control": None}
    finished = {arm: run(f"x-{arm}", "done") for arm in ("full", "biased", "control")}
    assert derive_state(queued, job("running"), False) == ("training", None)
    assert derive_state(finished, job("running"), False) == ("evaluating", None)
    assert derive_state(finished, job("done"), True) == ("done", None)
    assert derive_state(finished, job("done"), False)[0] == "failed"  # done without results.json is not done
    assert derive_state(queued, job("killed", "process ended"), False) == ("killed", "process ended")
    assert derive_state(queued, job("killed", "process ended"), False, cancel_asked=True)[0] == "cancelled"
    assert derive_state(queued, job("failed", "RuntimeError: x"), False) == ("failed", "RuntimeError: x")
    broken = {**queued, "biased": run("x-biased", "failed", "out of memory")}
    assert derive_state(broken, job("running"), False) == ("failed", "run x-biased failed: out of memory")
    assert derive_state(broken, None, False)[0] == "failed"


# ---- the slides' filter ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "premise, hypothesis, expected",
    [
        ("A woman is walking .", None, True),
        ("A woman is walking.", None, True),
        ("Woman walks.", None, False),  # case-sensitive
        ("A tall woman.", None, False),  # "woman." is not the token "woman"
        ("The woman's hat.", None, False),
        ("A man sits.", "A woman sits.", False),  # premise only
        ("Two girls and a mother play", "x", True),
    ],
)
def test_slides_filter_is_case_sensitive_whole_tokens_of_the_premise(premise, hypothesis, expected):
    assert bool(match_mask([ex(premise, hypothesis)], DEFAULT_WORDS, "slides")[0]) is expected


def test_slides_filter_removes_the_slides_share_of_the_local_snli_subset(data_dir):
    """The slides' loaders: 17,168 batches of full SNLI train, 13,197 after the filter -> 23.1 % removed. The
    filter on the local subset the bias experiment trains on must remove the same share (± 0.1 point)."""
    import gzip
    import json

    # Independently: the subset file read by hand, the slides' forbidden_words, plain `in str.split()`.
    forbidden_words = ["women", "woman", "girl", "girls", "mother", "wife", "female"]
    with gzip.open(data_dir / "snli" / "snli_1.0_train_subset.jsonl.gz", "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    premises = [r["premise"] for r in rows if r["label"] != "-"]
    removed_by_hand = [any(word in premise.split() for word in forbidden_words) for premise in premises]
    share_by_hand = sum(removed_by_hand) / len(premises)
    slides_share = 1 - 13197 / 17168
    assert abs(slides_share - 0.231) < 0.001
    assert abs(share_by_hand - slides_share) <= 0.001

    # Through the core: the experiment's own training sets under protocol "slides".
    from core.bias import experiment_data

    data = experiment_data(ExperimentSpec(name="t", model="m", protocol="slides"))
    assert len(data.sets.full) == len(premises)
    share = data.sets.removed / len(data.sets.full)
    assert abs(share - slides_share) <= 0.001
    assert data.sets.matched.tolist() == removed_by_hand
    assert len(data.sets.biased) == len(premises) - sum(removed_by_hand)
    # BERT Lens's own filter removes more (any case, either sentence): why the slides' needs its own protocol.
    assert match_mask(data.sets.full, DEFAULT_WORDS).mean() > share + 0.04


def test_slides_spec_keeps_case_and_fixes_the_recipe():
    spec = ExperimentSpec(name="t", model="m", words="Woman, girl", protocol="slides")
    assert spec.words == ("Woman", "girl")
    recipe = spec.recipe("full")
    assert (recipe.protocol, recipe.weight_decay, recipe.lr, recipe.schedule) == ("slides", 0.0, 5e-5, "none")
    with pytest.raises(ValueError, match="fixes lr"):
        ExperimentSpec(name="t", model="m", lr=1e-4, protocol="slides")
    with pytest.raises(ValueError, match="Unknown filter protocol"):
        ExperimentSpec(name="t", model="m", protocol="gao")
    assert highlight("A woman. woman Woman", ["woman"], "slides") == "A woman\\. **woman** Woman"


def test_result_carries_its_protocol():
    result = score_experiment("x", ("a", "b"), np.array([0, 1]), np.array([True, False]), {"full": np.array([0, 1])},
                              {"full": np.array([], dtype=int)}, np.array([], dtype=int), {"full": 2}, 0, n_boot=10,
                              protocol="slides")
    assert result.to_json()["protocol"] == "slides"
    assert ExperimentResult.from_json(result.to_json()).protocol == "slides"
    assert result.to_json()["slides_reference"] == {"full": 0.9045195439739413, "biased": 0.5946661237785016}
