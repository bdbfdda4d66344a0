"""The lab as a program (layer: app, the top): the ``labkit`` command and what it drives.

``cli`` parses arguments and calls the rest: ``setup`` (runs the set-up steps the parts
register), ``warmup`` (the class-data archives), ``doctor`` (machine checks, also
``labkit.setup_check()``), ``daemon`` (a shared background cluster), ``lab`` (JupyterLab
on the start page), ``startpage`` (the lesson index and the learner's progress).
Nothing below imports this package.
"""
