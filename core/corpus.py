"""Corpora for corpus-level analyses: the app's own sentences, pasted or uploaded text, SNLI/MRPC sentences.

Every source ends as a `Corpus`: unique sentences in a fixed order plus, for sentence-pair sources, the
positive pairs as indices into those sentences. Bad input raises `CorpusError` (a ValueError) whose message
names the problem and the fix. No streamlit here.

    from core import corpus
    c = corpus.builtin()                          # ~300 sentences written for this app
    c = corpus.from_text("One.\\nTwo.")           # one sentence per line (long lines are split at . ! ?)
    c = corpus.from_upload("x.csv", raw_bytes)    # .txt or .csv (a text column, or two for pairs)
    c = corpus.from_dataset("snli", "dev", limit=500)
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass
from typing import Iterable, Sequence, Union

from core import datasets

Item = Union[str, tuple[str, str]]

# Header names that mark the text column(s) of an uploaded CSV, checked in this order.
TEXT_COLUMNS = ("sentence", "text", "sentence1", "premise", "text_a", "question1", "review")
PAIR_COLUMNS = (("sentence1", "sentence2"), ("premise", "hypothesis"), ("text_a", "text_b"), ("question1", "question2"))
# Labels that mean "the two sentences say the same thing": only these pairs count as positives.
POSITIVE_LABELS = {"snli": {"entailment"}, "mrpc": {"1"}}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


class CorpusError(ValueError):
    """The text given cannot be turned into a corpus; the message says why and what to do."""


@dataclass(frozen=True)
class Corpus:
    """Unique sentences and, when the source had sentence pairs, the positive pairs.

    sentences   [S] unique, stripped, in first-seen order
    pairs       [P] (i, j) indices into sentences: the two sides of a positive pair (entailment, paraphrase)
    name        where it came from, for captions
    """

    name: str
    sentences: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...] = ()

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def digest(self) -> str:
        """Short content hash: equal corpora share cached results whatever their name."""
        h = hashlib.sha256()
        for s in self.sentences:
            h.update(s.encode("utf-8"))
            h.update(b"\n")
        h.update(repr(self.pairs).encode("ascii"))
        return h.hexdigest()[:16]

    def head(self, limit: int | None) -> "Corpus":
        """The first `limit` sentences, keeping only the pairs that fall inside them."""
        if limit is None or limit >= len(self.sentences):
            return self
        pairs = tuple((i, j) for i, j in self.pairs if i < limit and j < limit)
        return Corpus(self.name, self.sentences[:limit], pairs)


def from_items(items: Iterable[Item], name: str, positive: Sequence[bool] | None = None) -> Corpus:
    """Sentences and (a, b) pairs -> Corpus. Repeated sentences are kept once (SNLI repeats each premise for
    three hypotheses, and a repeated sentence would look like a perfectly similar second context).
    `positive[k]` says whether the k-th item, if a pair, is a positive pair (default: all are)."""
    index: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []

    def add(text: str) -> int | None:
        text = " ".join(text.split())
        if not text:
            return None
        return index.setdefault(text, len(index))

    for k, item in enumerate(items):
        if isinstance(item, str):
            add(item)
            continue
        a, b = add(item[0]), add(item[1])
        if a is not None and b is not None and a != b and (positive is None or positive[k]):
            pairs.append((a, b))
    if not index:
        raise CorpusError(f"{name} has no sentences: give at least two non-empty lines.")
    return Corpus(name, tuple(index), tuple(dict.fromkeys(pairs)))


def split_sentences(text: str) -> list[str]:
    """One sentence per line; a line holding several sentences is split after . ! ? before a capital."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(part.strip() for part in _SENTENCE_END.split(line.strip()) if part.strip())
    return out


def from_text(text: str, name: str = "pasted text", min_sentences: int = 2) -> Corpus:
    sentences = split_sentences(text)
    if len(sentences) < min_sentences:
        raise CorpusError(
            f"{name} has {len(sentences)} sentence(s); comparing contexts needs at least {min_sentences}. "
            "Paste more text, one sentence per line."
        )
    return from_items(sentences, name)


def from_csv(data: str, name: str = "uploaded CSV", column: str | None = None, column_b: str | None = None) -> Corpus:
    """A CSV with a header. Text comes from `column` (or the first known text column, else the first column);
    a second column (`column_b`, or a known pair such as sentence1/sentence2) makes pairs."""
    reader = csv.DictReader(io.StringIO(data))
    header = [h for h in (reader.fieldnames or []) if h is not None]
    if not header:
        raise CorpusError(f"{name} has no header row: put column names (e.g. 'sentence') on the first line.")
    lower = {h.strip().lower(): h for h in header}
    if column is None and column_b is None:
        for a, b in PAIR_COLUMNS:
            if a in lower and b in lower:
                column, column_b = lower[a], lower[b]
                break
        else:
            column = next((lower[c] for c in TEXT_COLUMNS if c in lower), header[0])
    for wanted in (column, column_b):
        if wanted is not None and wanted not in header:
            raise CorpusError(f"{name} has no column '{wanted}'; its columns are: {', '.join(header)}.")
    rows = list(reader)
    if column_b is None:
        items: list[Item] = [r.get(column) or "" for r in rows]
    else:
        items = [(r.get(column) or "", r.get(column_b) or "") for r in rows]
    corpus = from_items(items, name) if any(_filled(i) for i in items) else None
    if corpus is None or len(corpus) < 2:
        raise CorpusError(f"Column '{column}' of {name} has fewer than two sentences; pick the column that holds text.")
    return corpus


def _filled(item: Item) -> bool:
    return bool(item.strip()) if isinstance(item, str) else bool(item[0].strip() or item[1].strip())


def from_upload(filename: str, data: bytes) -> Corpus:
    """An uploaded .txt (one sentence per line) or .csv (see from_csv)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CorpusError(f"{filename} is not UTF-8 text (byte {err.start}); save it as UTF-8 and upload again.") from None
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    if suffix == "csv":
        return from_csv(text, name=filename)
    if suffix in ("txt", "text", ""):
        return from_text(text, name=filename)
    raise CorpusError(f"{filename}: only .txt (one sentence per line) and .csv files can be read.")


def from_file(path: str) -> Corpus:
    """A file on disk, read like an upload (the CLI's --corpus)."""
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise CorpusError(f"{path} not found: give a text file with one sentence per line.")
    return from_upload(file.name, file.read_bytes())


def from_dataset(name: str, split: str = "dev", limit: int | None = 500, seed: int = 0) -> Corpus:
    """Both sentences of `limit` seeded SNLI or MRPC pairs; entailment / paraphrase pairs become `pairs`.
    Raises datasets.DataUnavailable when the data folder lacks the file."""
    if name == "snli":
        examples = datasets.snli(split, limit, seed)
    elif name == "mrpc":
        examples = datasets.mrpc("validation" if split == "dev" else split, limit, seed)
    else:
        raise CorpusError(f"Unknown dataset '{name}': use snli or mrpc.")
    positive = [e.label in POSITIVE_LABELS[name] for e in examples]
    return from_items([(e.text, e.text_b or "") for e in examples], f"{name.upper()} {split}", positive)


def builtin(limit: int | None = None) -> Corpus:
    """The app's own sentences (written for BERT Lens, not taken from a dataset): everyday English where
    many words (bank, play, light, ...) recur in several senses and settings, so self-similarity has
    words with enough contexts."""
    return Corpus("built-in sentences", BUILTIN_SENTENCES).head(limit)


BUILTIN_SENTENCES: tuple[str, ...] = tuple(
    line.strip()
    for line in """
She walked along the bank of the river at dawn.
He opened an account at the bank near his office.
The bank raised its interest rates again this spring.
Children played on the grassy bank beside the stream.
The plane began to bank sharply to the left.
You can bank on her to finish the work on time.
The river flooded the low bank after the storm.
A robber was caught leaving the bank with a bag of cash.
The food bank needs more volunteers this winter.
My brother works at a small bank in the old town.
The kids play football in the park after school.
We watched a play about a king who lost his crown.
She will play the piano at the wedding on Saturday.
The dog loves to play with an old tennis ball.
The band played their new song for the first time.
He did not play fair in the last match.
There was too much play in the loose steering wheel.
The students wrote and staged a play for their parents.
Turn on the light so we can read the map.
The box was light enough for a child to carry.
Light travels faster than sound.
She wore a light jacket because the evening was warm.
They light candles on the table every Friday night.
The morning light came through the kitchen window.
A light rain fell on the city all afternoon.
The traffic light turned red as we reached the corner.
He likes to run in the park before work.
The play had a long run in the city theatre.
She will run for mayor next year.
The river runs through the middle of the town.
Do not run with scissors in your hand.
Our team scored a run in the final inning.
The old bus still runs twice a day.
There is a run in her stockings.
I caught a cold after walking home in the rain.
The water in the lake was too cold for swimming.
He gave me a cold look and walked away.
Keep the milk in a cold place.
The cold wind blew the leaves across the yard.
The winter was long and cold this year.
We went to the county fair and rode the big wheel.
It is not fair that she has to do all the work.
The weather will be fair and dry tomorrow.
The judge promised a fair trial for everyone.
She has fair hair and blue eyes.
The book fair opens next week at the library.
He threw a rock into the still pond.
They listened to rock music all night.
The boat began to rock in the rising waves.
She sat on a flat rock by the sea.
Her mother was a rock for the whole family.
The climbers rested under a huge rock.
Flowers bloom in the spring.
The spring in the old mattress was broken.
We drank fresh water from a mountain spring.
The cat will spring onto the table if you look away.
She plans to visit Japan next spring.
A spring in the clock had snapped.
The farmers dug a deep well behind the barn.
She sings very well for her age.
I hope you are feeling well today.
Tears began to well up in his eyes.
The old well was full of dry leaves.
He knows the city well after ten years there.
Turn right at the second traffic light.
You were right about the weather.
Everyone has the right to vote.
She writes with her right hand.
The right answer was printed at the back of the book.
He stood right behind me in the line.
I bought a new watch for my father.
We like to watch the birds in the garden.
Watch out for ice on the steps.
The soldier kept watch at the gate all night.
My watch stopped at midnight.
They watch the news every evening.
He struck a match to light the fire.
The match was cancelled because of the rain.
Her shoes match her bag perfectly.
He met his match in the final round.
The colours of the curtains do not match the walls.
We sat by the fire and told stories.
The company had to fire twenty workers.
A fire destroyed the old mill last night.
The soldiers were ordered to hold their fire.
She felt a fire in her heart when she spoke.
The fire alarm rang during the lesson.
We took the early train to the coast.
He wants to train as a nurse.
The coach will train the team every morning.
The train was late because of snow on the line.
They train dogs to find people under the snow.
A long train of camels crossed the desert.
I borrowed a book from the library.
Please book a table for four at eight.
The book on the shelf belongs to my sister.
We need to book our flight before the prices rise.
She wrote a book about her travels in India.
The police will book him for speeding.
He left the house without his keys.
Turn left after the bridge.
There is only one apple left in the bowl.
She writes with her left hand.
They left early to avoid the traffic.
The left side of the road was closed for repairs.
We had a picnic in the park.
You can park your car behind the shop.
The park was full of families on Sunday.
It took him ten minutes to park the van.
A new park opened near the station.
The dog ran across the park after a ball.
He read the paper over breakfast.
She wrote her name on a piece of paper.
The paper published a story about the mayor.
Her paper on climate change was accepted.
The walls were covered in old paper.
We sat at the kitchen table and talked.
The table shows the results for each year.
They will table the proposal at the next meeting.
The children set the table for dinner.
He carved a wooden table for his daughter.
Draw a straight line across the page.
We waited in line for an hour.
The phone line was dead after the storm.
She remembered every line of the poem.
The new line of shoes sold out quickly.
He left a note on the fridge.
Please note that the office closes early today.
She hit a high note at the end of the song.
The bank note was torn in half.
I made a note of her address.
What is the point of this meeting?
He tried to point at the map.
The pencil has a sharp point.
At one point we thought we were lost.
Our team won by a single point.
She wore a gold ring on her finger.
I will ring you when I arrive.
The boxers stepped into the ring.
We heard the doorbell ring twice.
A ring of trees surrounded the lake.
The dog began to bark at the postman.
The bark of the old oak was rough and grey.
Its bark is worse than its bite.
Beetles live under the bark of dead trees.
The fox gave a short bark in the dark.
He swung the bat and hit the ball.
A bat flew out of the cave at dusk.
She did not bat an eye at the news.
The cricket bat was made of willow.
Bats sleep upside down during the day.
A seal was lying on the warm rocks.
Please seal the envelope before you post it.
The letter carried the royal seal.
They used tape to seal the box.
The seal barked and dived into the water.
I wrote a letter to my grandmother.
The word begins with the letter B.
She received a letter from the bank.
Each letter on the sign was painted by hand.
He followed the rules to the letter.
She poured water into a tall glass.
The window glass was cracked.
He raised his glass to the happy couple.
The table had a glass top.
She cannot read without her glasses.
We looked at the stars from the hill.
The film star waved to the crowd.
He was the star of the school team.
The hotel has a five star rating.
A bright star shone above the church.
She gave a wave as the bus pulled away.
A big wave knocked him off his board.
The wave of heat lasted for a week.
The crowd began to wave flags.
A new wave of students arrived in the autumn.
We plant tomatoes every spring.
The plant on the windowsill needs water.
The car plant closed and hundreds lost their jobs.
Do not forget to water the plant.
They plan to plant a hundred trees.
The case went to court in June.
The tennis court was wet after the rain.
He tried to court her with flowers and poems.
The king and his court travelled to the coast.
The court ruled in favour of the workers.
A crane lifted the steel beams onto the roof.
The crane stood on one leg in the marsh.
She had to crane her neck to see the stage.
The crane at the harbour unloads ships all day.
What is the date today?
They went on a date to the cinema.
The date palm grows in hot dry places.
We need to set a date for the wedding.
The letter had no date on it.
Leaves fall from the trees in autumn.
Be careful not to fall on the ice.
The fall of the empire took centuries.
Prices began to fall after the holidays.
We visited the falls on our trip north.
She washed her face with cold water.
The clock face was painted blue.
We must face the facts.
The north face of the mountain is very steep.
He could not face another day at work.
Please hand me the salt.
She raised her hand to ask a question.
The hand of the clock pointed to twelve.
They gave us a hand with the move.
He won the game with his last hand of cards.
She nodded her head and smiled.
He will head the new team.
The head of the school gave a speech.
We should head home before it gets dark.
The player scored with a header from the corner.
I lost the key to the front door.
Hard work is the key to success.
Press any key to continue.
The song is written in the key of G.
The key points are listed at the end.
That red bike is mine.
The miners worked deep in the coal mine.
The ship struck a mine and sank.
This book is a gold mine of ideas.
A friend of mine lives in Canada.
The pitch was too wet to play on.
She could not sing at the right pitch.
They tried to pitch their tent before dark.
He threw the last pitch of the game.
The sales pitch went on for an hour.
She gave me a present for my birthday.
Everyone was present at the meeting.
He will present his findings on Monday.
In the present day few people write letters.
The present owner rebuilt the house.
Press the button to start the machine.
The press was waiting outside the court.
She used a press to make apple juice.
They had to press on through the snow.
The story was in the press for weeks.
The fish was covered in shiny scale.
Put the flour on the kitchen scale.
The map has a scale of one to fifty thousand.
The project grew on a huge scale.
He practised his scales on the piano every day.
The dishes are piled up in the sink.
The boat began to sink in the storm.
His heart began to sink when he saw the bill.
A heavy stone will sink to the bottom.
Wash your hands at the sink.
We met in the main square of the old town.
A square has four equal sides.
The carpet was square and red.
Now we are square and I owe you nothing.
Nine is the square of three.
She picked up a stick and threw it for the dog.
Stick the stamp on the top corner.
We must stick together.
He walks with a stick since the fall.
The label would not stick to the wet jar.
He wore a blue tie to the interview.
The game ended in a tie.
Please tie your shoes before you trip.
They tie the boat to the post at night.
Family ties are very strong in that village.
The cat sat on top of the wall.
Put the lid on top of the pot.
She is the top student in her class.
The top of the mountain was covered in snow.
He spun the top on the kitchen floor.
What type of music do you like?
She can type very fast.
He is not my type.
The letters were printed in large type.
This type of tree grows in wet soil.
Paris is the capital of France.
Write your name in capital letters.
They did not have enough capital to start the business.
The capital was full of tourists in summer.
Things change quickly in the city.
Keep the change.
She went to the shop to change her shoes.
A change of plan surprised everyone.
The weather will change by the weekend.
The hotel will charge extra for breakfast.
My phone needs to charge overnight.
He is in charge of the new project.
The soldiers led a charge up the hill.
The police dropped the charge against him.
She teaches a class of thirty children.
He flew business class to Tokyo.
The class read a poem about the sea.
There is a class on painting every Tuesday.
She has a degree in chemistry.
The temperature rose by one degree.
To some degree he was right.
Turn the wheel ninety degrees.
Her degree took four years to finish.
She has a slim figure and long legs.
I cannot figure out the answer.
The figure in the report was wrong.
A dark figure stood at the end of the street.
Figure five shows the results of the test.
They broke ground on the new school last week.
The ground was covered in snow.
He fell to the ground and hurt his knee.
We ground the coffee beans by hand.
There are good grounds for his complaint.
She has a strong interest in music.
The loan carries a high rate of interest.
It is in your interest to sign the form.
He showed no interest in the game.
The bank pays interest every month.
Put the books in order on the shelf.
The waiter took our order.
The judge called for order in the court.
I will order a pizza for dinner.
Law and order were restored after the riots.
We are having a party on Friday.
The party won the election by a wide margin.
She is the guilty party in this case.
A search party went into the woods.
The birthday party lasted until midnight.
The storm cut the power to the whole town.
The king had great power over his people.
Solar power is getting cheaper every year.
She felt the power of the music.
The engine has more power than the old one.
He broke the world record for the long jump.
We record every meeting.
She put on an old record and danced.
The company had a record year.
His record at school was excellent.
She walks to school every morning.
A school of fish swam past the boat.
He went to law school in Boston.
The school closed for the summer.
They painted the school hall green.
There is not enough space in the car.
The rocket was launched into space.
Leave a space between each word.
We need more space for the children to play.
The space station passes overhead at night.
The state will pay for the new bridge.
The house was in a terrible state.
Please state your name and address.
Texas is a large state.
The state of the roads got worse every winter.
The corner store sells bread and milk.
Store the rice in a dry place.
She has a store of good stories.
The store closes at nine on weekdays.
We store the boxes in the attic.
She told us a story about her childhood.
The building has ten storeys.
The story in the paper was not true.
Tell me a story before I go to sleep.
His story did not match the facts.
The term starts in September.
They agreed to the terms of the deal.
The doctor used a term I did not know.
He served a single term as mayor.
We are on good terms with our neighbours.
What time is it?
We had a great time at the beach.
She ran the race in record time.
It is time to go home.
Nine times out of ten he is right.
We took a trip to the mountains.
Be careful not to trip on the stairs.
The trip to the coast took four hours.
He tried to trip me in the hallway.
The school trip was cancelled because of the weather.
It is your turn to wash the dishes.
Turn the key to start the car.
The road takes a sharp turn after the farm.
The leaves turn red in the autumn.
She did me a good turn last year.
Water boils at one hundred degrees.
Please water the flowers while I am away.
The smell of bread made my mouth water.
The boat drifted on the calm water.
We drank water from the river.
She has a strong will to win.
It will rain tomorrow.
He left everything to his son in his will.
Where there is a will there is a way.
They will visit us in the summer.
She goes to work by bus.
The machine does not work any more.
This painting is his best work.
Hard work paid off in the end.
The plan will not work without more money.
The cat chased the mouse under the bed.
Click the mouse to open the file.
A mouse lived in the old barn.
My computer mouse stopped working.
The bird built a nest in the tree.
The family tree goes back three hundred years.
A tree fell across the road in the storm.
They sat in the shade of a tree.
The children decorated the tree with lights.
She heard a strange sound in the night.
The bridge was safe and sound after the flood.
He gave us sound advice.
The sound of the waves helped me sleep.
The ship crossed the sound at dawn.
The old man sat on a bench in the park.
The judge spoke from the bench.
The coach kept him on the bench all season.
We fixed the bench in the garden shed.
She works at a desk by the window.
The desk was covered in papers and cups.
Ask at the front desk for a key.
He bought an old desk from a market.
""".strip().splitlines()
    if line.strip()
)


# ---- temporary: replaced by the corpus engineer's resolve ---------------------------------------------
# temporary: replaced by the corpus engineer's resolve (core.corpus.resolve(spec, seed) -> Corpus with
# .name, .sentences, .pairs and .items). Only what `python -m core bias --corpus` needs: builtin[:N],
# snli|mrpc[:split[:limit]], or a file path.


@dataclass(frozen=True)
class _ResolvedCorpus(Corpus):  # temporary: replaced by the corpus engineer's resolve
    """A Corpus plus items: the original inputs in order, str or (str, str)."""

    items: tuple[Item, ...] = ()


def resolve(spec: str, seed: int = 0) -> Corpus:  # temporary: replaced by the corpus engineer's resolve
    parts = spec.strip().split(":")
    kind = parts[0].lower()
    if kind == "builtin":
        limit = int(parts[1]) if len(parts) > 1 and parts[1] else None
        c = builtin(limit)
        return _ResolvedCorpus(c.name, c.sentences, c.pairs, items=c.sentences)
    if kind in ("snli", "mrpc"):
        split = parts[1] if len(parts) > 1 and parts[1] else "dev"
        limit = int(parts[2]) if len(parts) > 2 and parts[2] else 500
        if kind == "snli":
            examples = datasets.snli(split, limit, seed)
        else:
            examples = datasets.mrpc("validation" if split == "dev" else split, limit, seed)
        items = tuple((e.text, e.text_b or "") for e in examples)
        c = from_dataset(kind, split, limit, seed)
        return _ResolvedCorpus(c.name, c.sentences, c.pairs, items=items)
    c = from_file(spec)
    return _ResolvedCorpus(c.name, c.sentences, c.pairs, items=c.sentences)
