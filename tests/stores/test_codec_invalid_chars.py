"""`codec.INVALID_CHARS` is exactly the set of characters SQS rejects, over the whole code space.

The pattern lists the rejected characters rather than negating the accepted ranges, because the
negated class costs ~4 ms to compile at every cold start. The two must match the same
characters: checked here for every code point against the rule SQS documents.
"""

from __future__ import annotations

import sys

from exactly_once.stores import codec

# What SQS accepts in a message body or attribute: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
# #x10000-#x10FFFF.
ACCEPTED = (
    (0x9, 0x9),
    (0xA, 0xA),
    (0xD, 0xD),
    (0x20, 0xD7FF),
    (0xE000, 0xFFFD),
    (0x10000, 0x10FFFF),
)


def accepted(code: int) -> bool:
    return any(low <= code <= high for low, high in ACCEPTED)


def test_every_code_point_is_matched_exactly_when_sqs_rejects_it() -> None:
    wrong = [
        hex(code)
        for code in range(sys.maxunicode + 1)
        if (codec.INVALID_CHARS.search(chr(code)) is not None) == accepted(code)
    ]
    assert wrong == []


def test_sanitise_replaces_only_the_rejected_characters() -> None:
    text = "a\x00b\x0bc\td\ud800e\ufffef\uffff\U0001f600\r\n\x1f\x20"
    assert codec.sanitise(text) == "a\ufffdb\ufffdc\td\ufffde\ufffdf\ufffd\U0001f600\r\n\ufffd "
    assert codec.sanitise("valid: \ue000\ufffd\U0010ffff") == "valid: \ue000\ufffd\U0010ffff"
