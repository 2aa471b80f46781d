"""Errors of the NKI front end: one line naming the rule, the value and the kernel's line."""


class NkiError(ValueError):
    """A kernel the NKI compiler or the chip would reject.

    ``str(e)`` is one line, ``"kernel.py:12: rule-id: what is wrong"``; ``e.rule`` is the stable
    rule id (docs/nki.md lists them).
    """

    def __init__(self, rule: str, message: str, where: str = ""):
        self.rule = rule
        self.where = where
        super().__init__(f"{where + ': ' if where else ''}{rule}: {message}")
