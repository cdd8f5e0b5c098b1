"""core.analyses.patching on tiny random models of every family, against implementations written here with plain
torch hooks (a forward pre-hook on the output projection replacing one head's slice of its input; forward hooks on
the query / key / value projections for path patching), one forward per cell."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from core.analyses import patching
from core.model.loading import LoadedModel
from core.training.classifier import Classifier, LoadedClassifier
from tests.integration.test_adapter import FAMILIES, _config, _modules, _peaked, _tokenizer

CLEAN = "the man sat on the [MASK] ."
CORRUPT = "the woman sat on the [MASK] ."
TARGET = "mat"


def _mlm(name: str):
    config, mlm_cls, _ = _config(name)
    config._attn_implementation = "eager"
    torch.manual_seed(11)
    mlm = mlm_cls(config).eval()
    _peaked(mlm)
    tokenizer = _tokenizer(name not in ("mpnet", "distilbert"))
    return mlm, LoadedModel(ref=f"tiny-{name}", path="", source="local", model=mlm.base_model, tokenizer=tokenizer,
                            device="cpu", masked_lm=mlm)


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return (request.param, *_mlm(request.param))


def _feed(tokenizer, text):
    return dict(tokenizer(text.replace("[MASK]", tokenizer.mask_token), return_tensors="pt"))


def _log_prob(mlm, tokenizer, feed) -> float:
    position = int((feed["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0])
    logits = mlm(**feed).logits[0, position]
    return float(torch.log_softmax(logits, -1)[tokenizer.convert_tokens_to_ids(TARGET)])


def _o_inputs(name, model, feed, layers: int) -> list[torch.Tensor]:
    """The output projection's input (every head's context, [1, T, H*d]) of each layer on one plain pass."""
    seen = []
    modules = {id(_modules(name, model, layer)["o"]): _modules(name, model, layer)["o"] for layer in range(layers)}
    handles = [m.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach().clone())) for m in modules.values()]
    try:
        with torch.no_grad():
            model(**feed)
    finally:
        for h in handles:
            h.remove()
    return seen  # one per call: ALBERT's shared module runs once per layer too


def _replace_head(name, model, layer: int, head: int, source: torch.Tensor, n_heads: int = 4):
    """A pre-hook on layer `layer`'s output projection putting `source`'s slice of head `head` in place; the call
    counter tells ALBERT's shared module which layer runs."""
    module = _modules(name, model, layer)["o"]
    calls = [0]
    d = source.shape[-1] // n_heads

    def pre(_m, args):
        index, calls[0] = calls[0], calls[0] + 1
        if name == "albert" and index != layer:
            return None
        x = args[0].clone()
        x[..., head * d:(head + 1) * d] = source[..., head * d:(head + 1) * d]
        return (x,) + tuple(args[1:])

    return module.register_forward_pre_hook(pre)


def test_head_patching_equals_plain_hooks_on_every_family(family):
    name, mlm, lm = family
    clean, corrupt = _feed(lm.tokenizer, CLEAN), _feed(lm.tokenizer, CORRUPT)
    result = patching.patch(lm, CLEAN, CORRUPT, TARGET, "heads", memory_mb=0.05)  # a few cells per forward
    clean_o = _o_inputs(name, mlm, clean, 3)
    with torch.no_grad():
        assert result.clean_metric == pytest.approx(_log_prob(mlm, lm.tokenizer, clean), abs=1e-5)
        assert result.corrupt_metric == pytest.approx(_log_prob(mlm, lm.tokenizer, corrupt), abs=1e-5)
    expected = np.empty((3, 4))
    for layer in range(3):
        for head in range(4):
            handle = _replace_head(name, mlm, layer, head, clean_o[layer])
            try:
                with torch.no_grad():
                    expected[layer, head] = _log_prob(mlm, lm.tokenizer, corrupt)
            finally:
                handle.remove()
    np.testing.assert_allclose(result.patched, expected, atol=1e-4)
    assert result.patched.shape == (3, 4) and result.metric == "log P(mat) at [MASK] (token 6)"
    assert np.ptp(expected) > 1e-3  # the heads matter, so a wrong head or layer could not pass
    np.testing.assert_allclose(result.recovered, (expected - result.corrupt_metric)
                               / (result.clean_metric - result.corrupt_metric), atol=1e-3)


def test_everything_patched_recovers_exactly_one(family):
    name, mlm, lm = family
    result = patching.patch(lm, CLEAN, CORRUPT, TARGET, "positions")
    all_heads = [(layer, head) for layer in range(3) for head in range(4)]
    assert patching.patch_together(lm, CLEAN, CORRUPT, TARGET, "heads", all_heads) == pytest.approx(
        result.clean_metric, abs=1e-5)
    last = [(2, p) for p in range(len(result.tokens))]
    assert patching.patch_together(lm, CLEAN, CORRUPT, TARGET, "positions", last) == pytest.approx(
        result.clean_metric, abs=1e-5)
    # after the last layer only the [MASK]'s own vector reaches its guess: that cell recovers 1, every other 0
    mask = result.tokens.index("[MASK]") if "[MASK]" in result.tokens else result.tokens.index("<mask>")
    assert result.patched[2, mask] == pytest.approx(result.clean_metric, abs=1e-5)
    np.testing.assert_allclose(np.delete(result.patched[2], mask), result.corrupt_metric, atol=1e-5)
    assert abs(result.clean_metric - result.corrupt_metric) > 1e-4  # ALBERT's tiny model: 3e-4


def test_an_input_patched_into_itself_changes_nothing(family):
    _, _, lm = family
    for over in patching.OVER:
        result = patching.patch(lm, CLEAN, CLEAN, TARGET, over)
        assert result.clean_metric == result.corrupt_metric
        np.testing.assert_allclose(result.patched, result.clean_metric, atol=1e-5)
        assert np.isnan(result.recovered).all()


def test_different_lengths_are_refused_showing_both_token_lists(family):
    _, _, lm = family
    with pytest.raises(patching.PatchingError, match=r"the man sat .*the cat sat on the mat"):
        patching.patch(lm, "the man sat [MASK] .", "the cat sat on the mat [MASK] .", TARGET)
    with pytest.raises(patching.PatchingError, match="one word piece"):
        patching.patch(lm, CLEAN, CORRUPT, "unhappy")
    with pytest.raises(patching.PatchingError, match="over must be"):
        patching.patch(lm, CLEAN, CORRUPT, TARGET, "neurons")


def test_path_patching_equals_plain_hooks():
    """Sender (1, 0) through receiver (2, 1) only: every other head frozen at its corrupted context while the
    sender carries the clean one, the receiver's q/k/v read there and put into a fresh corrupted pass."""
    name = "bert"
    mlm, lm = _mlm(name)
    clean, corrupt = _feed(lm.tokenizer, CLEAN), _feed(lm.tokenizer, CORRUPT)
    clean_o, corrupt_o = _o_inputs(name, mlm, clean, 3), _o_inputs(name, mlm, corrupt, 3)
    (l1, h1), (l2, h2) = (1, 0), (2, 1)
    d = 8
    handles = []
    for layer in range(l2):
        frozen = corrupt_o[layer].clone()
        if layer == l1:
            frozen[..., h1 * d:(h1 + 1) * d] = clean_o[layer][..., h1 * d:(h1 + 1) * d]
        handles.append(_modules(name, mlm, layer)["o"].register_forward_pre_hook(
            lambda _m, args, frozen=frozen: (frozen,)))
    received = {}
    for point in ("q", "k", "v"):
        handles.append(_modules(name, mlm, l2)[point].register_forward_hook(
            lambda _m, _a, out, point=point: received.__setitem__(point, out.detach().clone())))
    with torch.no_grad():
        mlm(**corrupt)
    for h in handles:
        h.remove()

    def put(point):
        def hook(_m, _a, out):
            out = out.clone()
            out[..., h2 * d:(h2 + 1) * d] = received[point][..., h2 * d:(h2 + 1) * d]
            return out
        return hook

    handles = [_modules(name, mlm, l2)[p].register_forward_hook(put(p)) for p in ("q", "k", "v")]
    try:
        with torch.no_grad():
            expected = _log_prob(mlm, lm.tokenizer, corrupt)
    finally:
        for h in handles:
            h.remove()
    result = patching.patch(lm, CLEAN, CORRUPT, TARGET, "heads", path=((l1, h1), (l2, h2)))
    # a path's effect is small on a random model (1.5e-4 here): compared at float32's precision, 50x finer
    assert result.path_metric == pytest.approx(expected, abs=3e-6)
    assert abs(result.path_metric - result.corrupt_metric) > 1e-4
    with pytest.raises(patching.PatchingError, match="below the receiver"):
        patching.patch(lm, CLEAN, CORRUPT, TARGET, "heads", path=((2, 0), (1, 0)))


# ---- classifiers -----------------------------------------------------------------------------------------------


def _classifier(linear: bool = False, seed: int = 3) -> LoadedClassifier:
    """A tiny BERT classifier ([CLS] pooling, linear head). linear=True makes it a linear toy: LayerNorms are
    identities, queries and keys zero (uniform attention) and the feed-forward blocks without their GELU, so the logits are
    an affine function of every head's context and every residual stream."""
    config, _, _ = _config("bert")
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    from transformers import BertModel

    encoder = BertModel(config, add_pooling_layer=False).eval()
    _peaked(encoder)
    if linear:
        with torch.no_grad():
            for layer in encoder.encoder.layer:
                layer.attention.output.LayerNorm = nn.Identity()
                layer.output.LayerNorm = nn.Identity()
                layer.intermediate.intermediate_act_fn = nn.Identity()
                for p in (*layer.attention.self.query.parameters(), *layer.attention.self.key.parameters()):
                    p.zero_()
    clf = Classifier(encoder, 3, "linear", pooling="cls", dropout=0.0).eval()
    with torch.no_grad():
        clf.head[0].weight.normal_(0, 1.0)
    lm = LoadedModel(ref="tiny-clf", path="", source="local", model=encoder, tokenizer=_tokenizer(True), device="cpu")
    return LoadedClassifier(encoder=lm, model=clf, labels=("a", "b", "c"), head={})


def test_classifier_logit_difference_equals_plain_hooks():
    clf = _classifier()
    clean, corrupt = _feed(clf.tokenizer, "the man sat ."), _feed(clf.tokenizer, "the woman sat .")

    def metric(feed):
        logits = clf.model(**feed)[0]
        return float(logits[2] - logits[0])

    result = patching.patch(clf, "the man sat .", "the woman sat .", ("c", 0), "heads")
    assert result.metric == "logit[c] - logit[a]"
    clean_o = _o_inputs("bert", clf.model.encoder, clean, 3)
    with torch.no_grad():
        assert result.clean_metric == pytest.approx(metric(clean), abs=1e-5)
        for layer in range(3):
            for head in range(4):
                handle = _replace_head("bert", clf.model.encoder, layer, head, clean_o[layer])
                try:
                    assert result.patched[layer, head] == pytest.approx(metric(corrupt), abs=1e-4)
                finally:
                    handle.remove()
    with pytest.raises(patching.PatchingError, match="not one of the run's classes"):
        patching.patch(clf, "the man sat .", "the woman sat .", "d")


@pytest.mark.parametrize("over", patching.OVER)
def test_attribution_patching_is_exact_on_a_linear_toy(over):
    clf = _classifier(linear=True)
    exact = patching.patch(clf, "the man sat on the mat .", "the woman sat on the mat .", 1, over)
    approx = patching.attribution_patch(clf, "the man sat on the mat .", "the woman sat on the mat .", 1, over)
    assert approx.method == "attribution" and approx.corrupt_metric == pytest.approx(exact.corrupt_metric, abs=1e-5)
    assert np.ptp(exact.patched) > 1e-3
    np.testing.assert_allclose(approx.patched, exact.patched, atol=1e-4)
    assert patching.correlation(exact, approx) == pytest.approx(1.0, abs=1e-6)


def test_attribution_patching_is_only_an_estimate_off_the_toy():
    """On a real (non-linear) model the estimate differs from exact patching, yet tracks it."""
    clf = _classifier()
    exact = patching.patch(clf, "the man sat on the mat .", "the woman sat on the mat .", 1)
    approx = patching.attribution_patch(clf, "the man sat on the mat .", "the woman sat on the mat .", 1)
    assert np.abs(approx.patched - exact.patched).max() > 1e-4
    assert np.isfinite(patching.correlation(exact, approx))


def test_lens_patch_draws_the_grid_it_computed():
    from core import lens

    _, lm = _mlm("bert")
    chart, frame, result = lens.patch(lm, CLEAN, CORRUPT, target=TARGET, over="positions", return_data=True)
    assert list(frame["cell"][:3]) == ["0·[CLS]", "1·the", "2·man"] and len(frame) == result.patched.size
    np.testing.assert_allclose(frame["recovered"].to_numpy(), result.recovered.ravel())
    assert chart.to_dict()["encoding"]["x"]["sort"] == [f"{i}·{t}" for i, t in enumerate(result.tokens)]
    _, _, approx = lens.patch(lm, CLEAN, CORRUPT, target=TARGET, method="attribution", return_data=True)
    assert approx.method == "attribution" and approx.patched.shape == (3, 4)
    with pytest.raises(ValueError, match="target=WORD"):
        lens.patch(lm, CLEAN, CORRUPT)


def test_cli_patch_prints_the_issues_keys(tmp_path, capsys):
    import json

    from core.__main__ import main
    from tests.tiny_mlm import make_tiny_mlm

    folder = str(make_tiny_mlm(tmp_path / "mlm", layers=2, heads=4))
    argv = ["patch", "--model", folder, "--clean", CLEAN, "--corrupt", CORRUPT, "--target", TARGET, "--over", "heads",
            "--json", "--quiet"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    # issue 34's keys, plus issue 48's gap and warnings, and issue 45's method (--method chooses it)
    assert set(out) == {"clean_metric", "corrupt_metric", "metric", "over", "tokens", "patched", "recovered", "gap",
                        "warnings", "method"} and out["method"] == "exact"
    assert out["over"] == "heads" and len(out["patched"]) == 2 and all(len(row) == 4 for row in out["patched"])
    assert out["tokens"][6] == "[MASK]"
    assert out["gap"] == pytest.approx(out["clean_metric"] - out["corrupt_metric"], abs=1e-12)
    # this random model barely tells the pair apart (|gap| ~ 2e-4) and its top guess at the [MASK] is not "mat"
    assert abs(out["gap"]) < patching.SMALL_GAP
    assert [w["code"] for w in out["warnings"]] == ["small_gap", "clean_not_top"]
    assert all(set(w) == {"code", "message"} and w["message"] for w in out["warnings"])
    assert main(argv[:-2]) == 0  # the table says so above its grid too
    text = capsys.readouterr().out
    assert "warning (small_gap)" in text and text.index("warning (small_gap)") < text.index("recovered, [layer")
    assert main(["patch", "--model", folder, "--clean", "the man sat [MASK] .", "--corrupt", CORRUPT, "--target",
                 TARGET]) == 2
    assert "[CLS] the man sat [MASK] . [SEP]" in capsys.readouterr().err


def test_a_bpe_target_is_the_word_after_a_space(tmp_path):
    """RoBERTa's BPE writes "he" after a space as "Ġhe", a different piece from a word-initial "he"."""
    import json

    from transformers import RobertaTokenizerFast

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, "h": 5, "e": 6, "he": 7, "Ġhe": 8, "Ġ": 9}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\nh e\nĠ he\n")
    tokenizer = RobertaTokenizerFast(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    assert patching._target_piece(tokenizer, "he") == ["Ġhe"]
    bert = _tokenizer(True)
    assert patching._target_piece(bert, "He") == ["he"] and patching._target_piece(bert, "##s") == ["##s"]


def _plain_logits(clf, text: str) -> torch.Tensor:
    with torch.no_grad():
        return clf.model(**_feed(clf.tokenizer, text))[0]


@pytest.mark.parametrize("method", ["exact", "attribution"])
def test_warnings_say_when_a_classifier_grid_is_noise(method):
    """Issue 48: a gap under SMALL_GAP and a class the clean input is not predicted as are flagged, checked against the
    classifier's own logits on both inputs."""
    clf = _classifier()
    run = patching.patch if method == "exact" else patching.attribution_patch
    clean, corrupt = "the man sat .", "the woman sat ."
    clean_logits, corrupt_logits = _plain_logits(clf, clean), _plain_logits(clf, corrupt)
    predicted = clf.labels[int(clean_logits.argmax())]
    seen = set()
    for k, label in enumerate(clf.labels):
        result = run(clf, clean, corrupt, label, "heads")
        gap = float(clean_logits[k] - corrupt_logits[k])
        assert result.gap == pytest.approx(gap, abs=1e-4) and result.to_json()["gap"] == pytest.approx(gap, abs=1e-4)
        assert result.clean_top == predicted and result.target == label
        expected = ["small_gap"] * (abs(gap) < patching.SMALL_GAP) + ["clean_not_top"] * (label != predicted)
        codes = [w.code for w in result.warnings]
        assert codes == expected and [w["code"] for w in result.to_json()["warnings"]] == expected
        if "clean_not_top" in codes:
            assert repr(predicted) in result.warnings[-1].message
        seen.add(tuple(codes))
    assert len(seen) >= 3  # the toy's three classes give different cases, so each check above was exercised


def test_a_target_that_is_not_the_clean_top_guess_is_flagged():
    mlm, lm = _mlm("bert")
    feed = _feed(lm.tokenizer, CLEAN)
    position = int((feed["input_ids"][0] == lm.tokenizer.mask_token_id).nonzero()[0, 0])
    with torch.no_grad():
        top = lm.tokenizer.convert_ids_to_tokens(int(mlm(**feed).logits[0, position].argmax()))
    assert top != TARGET
    result = patching.patch(lm, CLEAN, CORRUPT, TARGET, "heads")
    assert result.clean_top == top
    warning = next(w for w in result.warnings if w.code == "clean_not_top")
    assert repr(top) in warning.message and "[MASK]" in warning.message
    # the clean input's own top guess is not flagged
    assert "clean_not_top" not in [w.code for w in patching.patch(lm, CLEAN, CORRUPT, top, "heads").warnings]


def test_lens_patch_warns_with_the_results_warnings():
    from core import lens

    _, lm = _mlm("bert")
    with pytest.warns(UserWarning) as caught:
        _, _, result = lens.patch(lm, CLEAN, CORRUPT, target=TARGET, return_data=True)
    assert result.warnings
    assert [str(w.message) for w in caught if "clean_not_top" in str(w.message) or "small_gap" in str(w.message)] == \
        [f"{w.code}: {w.message}" for w in result.warnings]
