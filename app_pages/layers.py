"""Read the layers: the lens, neurons and sparse features, one tab each (each tab's widgets in app_pages/widgets)."""

import streamlit as st

from app_pages.widgets.common import intro
from app_pages.widgets import layer_lens, neurons, sparse_features
from core.views.layers import TABS

st.title("Read the layers")
intro(
    "A masked-word head turns a vector into word guesses; applied to every layer's vector at every token, it shows "
    "what each layer already 'says' (the logit lens), or, through a small translator fitted per layer, what it "
    "means (the tuned lens).",
    "Below the lens, browse the feed-forward neurons and the sparse features a layer is made of, on your sentence "
    "and over a corpus, and see which change after fine-tuning.",
)
# A key keeps the open tab across reruns (without one, a job finishing in the Neurons tab reopened Lens).
# The tabs' names are the view's (core.views.layers.TABS: each tab's analysis), as a link's `tab` reads them.
lens_tab, neurons_tab, features_tab = st.tabs(list(TABS), key="layers.tab", on_change="rerun")
with lens_tab:
    layer_lens.render()
with neurons_tab:
    neurons.render()
with features_tab:
    sparse_features.render()
