"""Task labels read from CoNLL-U (issue 49): the FEATS column, each task's labels, unknown tasks refused."""

import pytest

from core.analyses.layer_knowledge.tasks import TaskError, check_task, word_labels
from core.data.treebank import parse_conllu

CONLLU = (
    "# sent_id = 1\n"
    "1\tShe\tshe\tPRON\tPRP\tCase=Nom|Gender=Fem|Number=Sing|Person=3\t2\tnsubj\t_\t_\n"
    "2\truns\trun\tVERB\tVBZ\tMood=Ind|Number=Sing|Tense=Pres\t0\troot\t_\t_\n"
    "3\thome\thome\tADV\tRB\t_\t2\tadvmod\t_\t_\n"
    "4\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_\n\n"
)


def test_each_task_reads_its_column():
    sentence = parse_conllu(CONLLU)[0]
    assert word_labels(sentence, "upos") == ("PRON", "VERB", "ADV", "PUNCT")
    assert word_labels(sentence, "xpos") == ("PRP", "VBZ", "RB", ".")
    assert word_labels(sentence, "deprel") == ("nsubj", "root", "advmod", "punct")
    assert word_labels(sentence, "morph:Number") == ("Sing", "Sing", None, None)
    assert word_labels(sentence, "morph:Gender") == ("Fem", None, None, None)


@pytest.mark.parametrize("bad", ["", "pos", "morph:", "morph:number", "morph:Number;x", "UPOS"])
def test_unknown_tasks_are_refused_with_the_choices(bad):
    with pytest.raises(TaskError, match="upos, xpos, deprel or morph:FEAT"):
        check_task(bad)


def test_real_treebank_has_feats(data_dir):
    from core.data.treebank import read_conllu
    from tests.conftest import require_data

    sentences = read_conllu(require_data(data_dir / "ud_english_ewt/en_ewt-ud-dev.conllu", "UD EWT"), limit=50)
    numbers = [v for s in sentences for v in word_labels(s, "morph:Number") if v]
    # UD's Number values in EWT: Sing, Plur and Ptan (plurale tantum, "scissors").
    assert {"Sing", "Plur"} <= set(numbers) <= {"Sing", "Plur", "Ptan"} and len(numbers) > 50
