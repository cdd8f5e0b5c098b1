"""What each layer knows (issue 49): label probes per layer with control tasks and MDL, and LEACE concept erasure.

`tasks` holds what the probes and the eraser share: the word-level tasks read from a CoNLL-U treebank and the
labelled word vectors of every layer.
"""
