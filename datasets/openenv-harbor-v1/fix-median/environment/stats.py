"""Summary statistics of a list of numbers."""


def mean(values):
    return sum(values) / len(values)


def median(values):
    middle = len(values) // 2
    return values[middle]


def spread(values):
    return max(values) - min(values)
