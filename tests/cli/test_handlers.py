"""Loading a handler from its folder the way Lambda does from the function's asset."""

from __future__ import annotations

from pathlib import Path

from exactly_once_ops.handlers import load_handler


def test_a_handler_imports_modules_beside_it(tmp_path: Path) -> None:
    """Lambda puts the asset root on sys.path, so a handler's own helper module imports."""
    (tmp_path / "pricing_helper_for_test.py").write_text("def price() -> int:\n    return 7\n")
    (tmp_path / "handler.py").write_text(
        "import pricing_helper_for_test\n\n"
        "def handle(event, context):\n"
        "    return pricing_helper_for_test.price()\n"
    )
    handle = load_handler(str(tmp_path), "handler.handle")
    assert handle({}, None) == 7
