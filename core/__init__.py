"""BERT Lens core: models, one forward pass, analyses, training and jobs. Never imports streamlit."""
