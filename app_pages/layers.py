"""Read the layers: the lens, neurons and sparse features, one tab each (each tab's widgets in app_pages/widgets)."""

import streamlit as st

from app_pages.widgets.analysis_tab import page_tabs
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
# The page's own tabs (their names the view's, core.views.layers.TABS: each tab's analysis, as a link's `tab`
# reads them), then one per analysis declared with a tab on this view (core.contract); the key keeps the open tab
# across reruns (without one, a job finishing in the Neurons tab reopened Lens).
page_tabs("layers", dict(zip(TABS, (layer_lens.render, neurons.render, sparse_features.render), strict=True)),
          key="layers.tab")
