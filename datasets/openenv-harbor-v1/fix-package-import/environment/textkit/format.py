from textkit import VERSION


def shout(text):
    return text.upper() + "!"


def whisper(text):
    return text.lower() + "..."


def banner(text):
    return f"textkit {VERSION}: {text}"
