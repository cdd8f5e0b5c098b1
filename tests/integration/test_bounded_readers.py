"""Issue 44, item 3: corpus readers stream and stop at --limit; a file read without a limit is still bounded.

`anisotropy --corpus 2GB.csv --limit 5` was OOM-killed at 18.8 GB: the whole file was read, decoded and parsed
before `--limit` cut the corpus (a 200 MB file took 2.9 GB)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.analyses import explorer as ex
from core.data import corpus as corpora

REPO = Path(__file__).resolve().parents[2]
MB = 2 ** 20


class EndlessLines(io.RawIOBase):
    """A binary file of `first` then `line` repeated without end, counting the bytes anyone read from it."""

    def __init__(self, first: bytes, line: bytes):
        self.first, self.line, self.read_bytes = first, line, 0
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        while len(self._buffer) < len(target):
            self._buffer += self.first or self.line * 64
            self.first = b""
        n = len(target)
        target[:n], self._buffer = self._buffer[:n], self._buffer[n:]
        self.read_bytes += n
        return n


def _numbered(kind: str, n: int = 20) -> bytes:
    """n distinct sentences as a file of `kind`'s format (a header first for CSV)."""
    sentences = [f"Sentence number {k} is here." for k in range(n)]
    if kind == "csv":
        return ("text,label\n" + "".join(f"{s},{k % 2}\n" for k, s in enumerate(sentences))).encode()
    if kind == "jsonl":
        return "".join(json.dumps({"text": s}) + "\n" for s in sentences).encode()
    if kind == "conllu":
        return "".join(f"# text = {s}\n1\t{s.split()[0]}\t_\tX\t_\t_\t0\troot\t_\t_\n\n" for s in sentences).encode()
    return "".join(s + "\n" for s in sentences).encode()


REPEATED = {"csv": b"Filler line.,0\n", "jsonl": b'{"text": "Filler line."}\n', "txt": b"Filler line.\n",
            "conllu": b"1\tFiller\t_\tX\t_\t_\t0\troot\t_\t_\n\n"}


@pytest.mark.parametrize("kind", ["txt", "csv", "jsonl", "conllu"])
def test_a_limit_stops_reading_an_endless_file(kind):
    stream = EndlessLines(_numbered(kind), REPEATED[kind])
    corpus = corpora.from_stream(f"endless.{kind}", io.BufferedReader(stream, buffer_size=4096), limit=5)
    assert list(corpus.head(5).sentences) == [f"Sentence number {k} is here." for k in range(5)]
    assert stream.read_bytes <= 8192  # the first buffer or two: reading stopped at the limit


def test_a_limit_cuts_the_same_corpus_as_a_whole_read(tmp_path):
    """head(N) / take(N) of a file read up to N equal those of the whole file read (the independent result),
    repeats and pairs included."""
    rows = ["sentence1,sentence2,label"] + [f"A{k % 7} is said.,B{k % 5} is said.,{k % 2}" for k in range(60)]
    path = tmp_path / "pairs.csv"
    path.write_text("\n".join(rows) + "\n")
    whole = corpora.from_file(path)
    for n in (1, 2, 3, 5, 9, 12):
        cut = corpora.resolve(str(path), limit=n)
        assert cut.head(n).sentences == whole.head(n).sentences
        assert cut.take(n).items == whole.take(n).items and cut.take(n).pairs == whole.take(n).pairs


def test_without_a_limit_a_file_is_read_up_to_the_byte_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLENS_MAX_CORPUS_BYTES", "1K")
    path = tmp_path / "big.txt"
    path.write_bytes(_numbered("txt", 200))  # 5.6 KB
    with pytest.raises(corpora.CorpusError, match=r"big.txt is larger than .* --limit N"):
        corpora.resolve(str(path))
    assert len(corpora.resolve(str(path), limit=5).head(5)) == 5  # what the message advises works
    # One endless line holds no newline to stop at: it is read up to the budget, not to the end.
    stream = EndlessLines(b"", b"word ")
    with pytest.raises(corpora.CorpusError, match="is larger than"):
        corpora.from_stream("one-line.txt", io.BufferedReader(stream, buffer_size=256), limit=5)
    assert stream.read_bytes <= 1024 + 256
    table = tmp_path / "big.csv"
    table.write_bytes(_numbered("csv", 200))
    with pytest.raises(corpora.CorpusError, match="is larger than"):  # the explorer's file reader too
        ex.load_examples(str(table))


def test_utf8_errors_name_the_byte_of_the_file():
    data = "One.\nTwo.\n".encode() + b"caf\xe9\n"
    with pytest.raises(corpora.CorpusError, match=r"not UTF-8 text \(byte 13\)"):
        corpora.from_upload("x.txt", data)


def test_a_300_mb_csv_with_limit_5_stays_under_1_5_gb(tmp_path, tiny_bert_dir):
    """The command line on a 300 MB CSV: peak RSS of the process (resource.getrusage of a wrapper's only child)."""
    path = tmp_path / "big.csv"
    block = b"Filler sentence that repeats many times over.,0\n" * 20_000  # ~1 MB
    with path.open("wb") as out:
        out.write(_numbered("csv"))
        for _ in range(330):
            out.write(block)
    assert path.stat().st_size > 300 * MB
    command = [sys.executable, "-m", "core", "anisotropy", "--model", str(tiny_bert_dir), "--corpus", str(path),
               "--limit", "5", "--pairs", "20", "--json"]
    wrapper = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode); "
               "sys.stderr.write(done.stderr)")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", wrapper, *command], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    peak_kb, code = map(int, done.stdout.split())
    print(f"peak RSS {peak_kb / 1024:.0f} MB, exit {code}")
    assert code == 0, done.stderr
    assert peak_kb * 1024 < 1.5 * 2 ** 30, f"peak RSS {peak_kb / 1024:.0f} MB"


def test_a_dataset_file_is_read_up_to_its_row_cap(tmp_path):
    import gzip

    from core.data import datasets

    path = tmp_path / "rows.jsonl.gz"
    with gzip.open(path, "wt") as out:
        out.writelines('{"premise": "a", "hypothesis": "b", "label": "entailment"}\n' for _ in range(11))
    assert len(list(datasets.read_jsonl_gz(path, max_rows=11))) == 11
    with pytest.raises(datasets.DataUnavailable, match="more than 10 rows"):
        list(datasets.read_jsonl_gz(path, max_rows=10))
