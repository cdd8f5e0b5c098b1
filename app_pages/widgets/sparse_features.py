"""Read the layers: the sparse features tab."""

import streamlit as st


def render() -> None:
    st.info("This section is not built yet.")
