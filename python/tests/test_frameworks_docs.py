"""Every ``python`` example of docs/frameworks.md runs as written: each in a fresh process, in
an empty directory of its own (the examples write ``memories.db`` there), with no model."""

import pathlib
import re
import subprocess
import sys
import tempfile
import unittest

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "frameworks.md"


def examples():
    return re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.MULTILINE | re.DOTALL)


class FrameworkDocsExamples(unittest.TestCase):
    def test_the_page_has_its_examples(self):
        self.assertEqual(len(examples()), 5)

    def test_every_example_runs(self):
        for number, code in enumerate(examples(), 1):
            with self.subTest(example=number), tempfile.TemporaryDirectory() as directory:
                done = subprocess.run(
                    [sys.executable, "-W", "ignore", "-c", code],
                    cwd=directory,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                self.assertEqual(done.returncode, 0, done.stderr[-3000:])
                self.assertTrue(done.stdout.strip(), "an example prints what it found")


if __name__ == "__main__":
    unittest.main()
