"""A stand-in for the "What each layer knows" view (name `layer_knowledge`), registered by tests/erase_stub.py only
while no module of core/views defines it: the erase analysis declares that view, which the probe-labels branch
adds. Delete this folder once that view is on the branch."""

from core.views import View

VIEW = View(name="layer_knowledge", title="What each layer knows", url_path="layer_knowledge_stub", icon="🧠",
            page="app_pages/layers.py", order=999, lesson_step=False)
