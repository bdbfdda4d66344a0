"""pytest plugin loaded with nbval (``-p nbval_plugin``): ignore stderr when comparing outputs.

librdkafka logs broker disconnects from its own threads to the kernel's stderr, and
they land in whichever cell happens to be running. They are not part of any
lesson's claims, so the comparison of checked cells looks at stdout and results only.
"""

from __future__ import annotations

from nbval.plugin import IPyNbCell

_compare = IPyNbCell.compare_outputs


def _without_stderr(outputs):
    return [o for o in outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]


def compare_outputs(self, test, ref, skip_compare=None):
    return _compare(self, _without_stderr(test), _without_stderr(ref), skip_compare)


IPyNbCell.compare_outputs = compare_outputs
