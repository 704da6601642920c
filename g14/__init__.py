"""The G14 course pack (attention, embeddings and transformer reasoning).

Its manifest, ``course.yaml``, names the specs, the reference, the starter,
the mutant catalogue, the sample submissions and the public checks in this
folder; the grader finds the pack through the ``grader.packs`` entry point.
"""
