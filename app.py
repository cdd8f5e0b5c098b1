"""BERT Lens. Run with `streamlit run app.py`.

Streamlit reads this file in two ways:
- `streamlit run app.py` finds `app` below (an st.App) and imports this file as the module `app` to serve it. That
  import starts the warm-up (app_pages/shell/launch.py: imports, the default model, a first forward; the server's
  lifespan starts it where nothing did) while Streamlit starts and the first browser loads the page, which cuts the
  cold start (issue 18, point 4; issue 47).
- Every browser session then runs this file as its script (`__main__`, also under AppTest): the router
  (app_pages/shell/router.py), once the warm-up's imports are done; while it waits, a blank chart has the browser load
  Streamlit's chart code.
- `streamlit run app.py -- --class` (or BERTLENS_CLASS=1) is class mode: app_pages/shell/class_server.py serves the app
  on the local network and announces the class; the router gives any device that is not the teacher's only the
  student view (app_pages/shell/classroom.py).
Nothing heavy is imported at the top, so the server answers before the warm-up has finished.
"""

import streamlit as st
from starlette.middleware import Middleware

from app_pages.shell import class_server, launch

# A blank 1x1 chart: its element makes the browser fetch and compile Streamlit's chart code (~0.8 MB of JavaScript,
# otherwise loaded with the first chart, after the first forward pass) while the server is still importing torch.
BLANK_CHART = {"width": 1, "height": 1, "mark": "point", "data": {"values": []}, "config": {"view": {"stroke": None}}}

if __name__ == "__main__":
    if launch.session_started():
        prefetch = st.empty()
        if launch.wait_for_chart_modules():
            prefetch.vega_lite_chart(BLANK_CHART)
        with st.spinner("Starting BERT Lens: loading PyTorch and transformers (only the first visit after a restart)…"):
            launch.wait_for_imports()
        prefetch.empty()
    from app_pages.shell import router

    router.main()
else:
    class_server.prepare()  # `-- --class`: serve the class on the network (app_pages/shell/class_server.py)
    # The warm-up's imports begin now, not after the server's own start (the lifespan's turn); after prepare(),
    # which in class mode re-executes this process first.
    launch.start()
    app = st.App("app.py", lifespan=launch.lifespan, middleware=[Middleware(class_server.StudentGate)])
