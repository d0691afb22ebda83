import subprocess
import unittest


def run(*args):
    return subprocess.run(["python3", "/app/convert.py", *args], capture_output=True, text=True, timeout=30)


class ConvertTest(unittest.TestCase):
    def test_conversions(self):
        for args, out in [(("100", "C", "F"), "212.00 F"), (("32", "F", "C"), "0.00 C"), (("0", "K", "C"), "-273.15 C"), (("-40", "C", "F"), "-40.00 F"), (("300", "K", "F"), "80.33 F"), (("1.5", "C", "C"), "1.50 C")]:
            r = run(*args)
            self.assertEqual((r.returncode, r.stdout), (0, out + "\n"), args)

    def test_errors(self):
        for args in [("abc", "C", "F"), ("10", "X", "C"), ("-300", "C", "K"), ("1", "C")]:
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertTrue(r.stderr.startswith("error:"), (args, r.stderr))
            self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main()
