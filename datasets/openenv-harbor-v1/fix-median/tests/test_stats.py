import sys
import unittest

sys.path.insert(0, "/app")
import stats  # noqa: E402


class MedianTest(unittest.TestCase):
    def test_odd_unsorted(self):
        self.assertEqual(stats.median([5, 1, 3]), 3)

    def test_even(self):
        self.assertEqual(stats.median([4, 1, 3, 2]), 2.5)

    def test_single(self):
        self.assertEqual(stats.median([7]), 7)

    def test_leaves_input_alone(self):
        values = [3, 1, 2]
        stats.median(values)
        self.assertEqual(values, [3, 1, 2])

    def test_others_unchanged(self):
        self.assertEqual(stats.mean([1, 2, 3]), 2)
        self.assertEqual(stats.spread([4, 9, 1]), 8)


if __name__ == "__main__":
    unittest.main()
