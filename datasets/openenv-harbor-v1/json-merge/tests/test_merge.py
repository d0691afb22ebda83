import json
import os
import subprocess
import tempfile
import unittest


def run_merge(base, override):
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("b.json", "o.json", "m.json")]
        for p, obj in zip(paths, (base, override)):
            with open(p, "w") as f:
                json.dump(obj, f)
        subprocess.run(["python3", "/app/merge.py", *paths], check=True, timeout=30)
        with open(paths[2]) as f:
            text = f.read()
    return text


class MergeTest(unittest.TestCase):
    def test_config_merged(self):
        with open("/app/config/merged.json") as f:
            merged = json.load(f)
        self.assertEqual(merged, {"name": "api", "server": {"host": "0.0.0.0", "port": 9000, "tls": {"cert": "/etc/cert.pem", "enabled": True}}, "workers": 2})

    def test_deep_and_null(self):
        text = run_merge({"a": {"b": {"c": 1, "d": 2}}, "x": [1, 2]}, {"a": {"b": {"d": None, "e": 3}}, "x": [3]})
        self.assertEqual(json.loads(text), {"a": {"b": {"c": 1, "e": 3}}, "x": [3]})

    def test_object_replaces_scalar(self):
        self.assertEqual(json.loads(run_merge({"a": 1}, {"a": {"b": 2}})), {"a": {"b": 2}})

    def test_format(self):
        text = run_merge({"b": 1, "a": 2}, {})
        self.assertEqual(text.rstrip("\n"), json.dumps({"a": 2, "b": 1}, sort_keys=True, indent=2))


if __name__ == "__main__":
    unittest.main()
