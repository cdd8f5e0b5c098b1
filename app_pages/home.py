"""Home: what BERT Lens is, what each page shows (every view registered in core/views/), and the model in use."""

import streamlit as st

from app_pages.widgets.common import cached_model, model_ref, show_model_error
from app_pages.widgets.common import sidebar_place
from core import views
from core.model.loading import ModelUnavailable, display_name
from core.safe_text import markdown_code

st.title("BERT Lens")
st.markdown(
    "BERT Lens lets you look inside BERT, the language model behind many search engines and chatbots. "
    f"Type a sentence in {sidebar_place()}, then open a page to see what the model does with it, layer by layer."
)

st.subheader("What each page shows")
listed = [view for view in views.all_views() if view.url_path]  # every view but this page
for row in range(0, len(listed), 2):
    for column, view in zip(st.columns(2), listed[row:row + 2]):
        with column.container(border=True, height="stretch"):  # one height per row
            st.page_link(view.page, label=view.title, icon=view.icon)
            st.caption(view.summary)

st.subheader("The model in use")
try:
    lm = cached_model(model_ref())
except ModelUnavailable as err:
    show_model_error(err)
else:
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Layers", lm.num_layers)
    c2.metric("Heads per layer", lm.num_heads)
    c3.metric("Parameters", f"{lm.num_parameters / 1e6:.1f} M")
    c4.metric("Longest input", f"{lm.max_length} tokens")
    st.caption(f"{markdown_code(display_name(lm.ref))} ({lm.source}, {lm.config.model_type}), loaded from {markdown_code(lm.path)} on {lm.device}.")
