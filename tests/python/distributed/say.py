"""One line to stdout in one write: the ranks share torchrun's stdout, and print() may write a
line and its newline separately, interleaving the ranks' lines."""

import os


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())
