import subprocess
import unittest


def py(code):
    return subprocess.run(["python3", "-c", code], cwd="/app", capture_output=True, text=True, timeout=30)


class TextkitTest(unittest.TestCase):
    def test_imports(self):
        r = py("import textkit; print(textkit.shout('hi'))")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "HI!\n")

    def test_version_and_functions(self):
        r = py("import textkit, textkit.format as f; print(textkit.VERSION, textkit.whisper('A'), f.banner('x'))")
        self.assertEqual(r.stdout, "1.2.0 a... textkit 1.2.0: x\n", r.stderr)

    def test_format_first(self):
        r = py("import textkit.format as f; print(f.shout('ok'))")
        self.assertEqual(r.stdout, "OK!\n", r.stderr)


if __name__ == "__main__":
    unittest.main()
