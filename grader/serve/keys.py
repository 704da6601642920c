"""The tool's RSA key (LTI): made on first start, kept in the server's folder (mode 0600), never in the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.serve.state import private_file

__all__ = ["tool_key"]


def tool_key(state: Path) -> Any:
    """The tool's `grader.serve.lti.ToolKey`, read from ``state/tool-key.pem`` (made there the first time)."""
    from grader.serve.lti import ToolKey

    return ToolKey.from_pem(private_file(state / "tool-key.pem", lambda: ToolKey.generate().to_pem()))
