"""BERT Lens. Run with `streamlit run app.py`.

Streamlit reads this file in two ways:
- `streamlit run app.py` finds `app` below (an st.App) and imports this file as the module `app` to serve it. The
  server's lifespan starts the warm-up (app_pages/launch.py: imports, the default model, a first forward) while
  Streamlit starts and the first browser loads the page, which cuts the cold start (issue 18, point 4).
- Every browser session then runs this file as its script (`__main__`, also under AppTest): the router
  (app_pages/router.py), once the warm-up's imports are done.
Nothing heavy is imported at the top, so the server answers before the warm-up has finished.
"""

import streamlit as st

from app_pages import launch

if __name__ == "__main__":
    if launch.session_started():
        with st.spinner("Starting BERT Lens: loading PyTorch and transformers (only the first visit after a restart)…"):
            launch.wait_for_imports()
    from app_pages import router

    router.main()
else:
    app = st.App("app.py", lifespan=launch.lifespan)
