"""The parts of the golden-set recorder (`python -m tests.parity.record`).

* `reference`: imports the reference from its checkout, and only from there.
* `kinds`: what a case is, read from its JSON, not from its file name.
* `spec`: a spec case's stored inputs, config and kind; which cases to record.
* `calls` and `colab`: the reference's objects for a case's config, and
  the cells of its colabs, shared by the recipes and the builtin spec.
* `cases_units`, `cases_values`, `cases_agents`, `cases_loops`: one recipe
  per kind of case, each returning the keys it recomputes.
* `recipes`: the recipe of each kind, and one case recorded.
* `write`: a set written: its cases, sidecars and `PLATFORM.json`.
"""
