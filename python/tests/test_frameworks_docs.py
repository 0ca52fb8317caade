"""Every ``python`` example of docs/frameworks.md runs as written: each as a fresh
``__main__`` module of its own, in an empty directory of its own (the examples write
``memories.db`` there), with no model, and prints what it found.

The examples run inside this test process rather than one process each, so the test measures
the examples and not the exit of a process per example."""

import contextlib
import io
import os
import pathlib
import re
import tempfile
import unittest

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "frameworks.md"


def examples():
    return re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.MULTILINE | re.DOTALL)


class FrameworkDocsExamples(unittest.TestCase):
    def test_the_page_has_its_examples(self):
        self.assertEqual(len(examples()), 5)

    def test_every_example_runs(self):
        here = os.getcwd()
        for number, code in enumerate(examples(), 1):
            with self.subTest(example=number), tempfile.TemporaryDirectory() as directory:
                printed = io.StringIO()
                os.chdir(directory)
                try:
                    with contextlib.redirect_stdout(printed):
                        exec(compile(code, f"docs/frameworks.md example {number}", "exec"), {"__name__": "__main__"})
                finally:
                    os.chdir(here)
                self.assertTrue(printed.getvalue().strip(), "an example prints what it found")


if __name__ == "__main__":
    unittest.main()
