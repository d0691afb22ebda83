"""Small text helpers."""
from textkit.format import shout, whisper

VERSION = "1.2.0"

__all__ = ["VERSION", "shout", "whisper"]
