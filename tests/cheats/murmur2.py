"""Cheats tried on murmur2."""

from . import Cheat, add_cell, replace_solution

CHEATS = [
    Cheat("import_the_reference",
          lambda nb: replace_solution(nb, "def murmur2", "from labkit.partitioning import murmur2, to_positive, "
                                                         "java_partition"),
          why="import labkit's own murmur2 instead of writing it"),
    Cheat("alias_through_labkit",
          lambda nb: replace_solution(nb, "def murmur2", "import labkit.partitioning as pt\n\n\n"
                                                         "def murmur2(data: bytes) -> int:\n"
                                                         "    return pt.murmur2(data)"),
          why="wrap the reference in a function of the right name, reached through an alias"),
    Cheat("dynamic_import",
          lambda nb: replace_solution(nb, "def murmur2", "def murmur2(data: bytes) -> int:\n"
                                                         "    m = __import__('labkit.part' + 'itioning', "
                                                         "fromlist=['x'])\n    return m.murmur2(data)"),
          why="hide the import in a string built at run time"),
    Cheat("patch_the_grader",
          lambda nb: add_cell(nb, "import labkit.grading.checks as g\n"
                                  "g.run_check = lambda c, ns: g.CheckResult(c.id, c.points, c.points, c.hidden, "
                                  "'passed')\n\n\ndef murmur2(data):\n    return 0\n"),
          why="replace the function that runs checks, so every check passes in the kernel"),
]
