"""Read the layers: the layer lens tab."""

import streamlit as st


def render() -> None:
    st.info("This section is not built yet.")
