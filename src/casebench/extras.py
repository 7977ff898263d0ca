"""Optional extras: which ``pip install 'casebench[...]'`` brings which module, and the error that
says so instead of a traceback.

Heavy or optional dependencies are imported inside the code that needs them. When one is
missing, ``MissingExtra`` names the extra to install; the CLI turns it (and any
``ModuleNotFoundError`` of a known optional module) into that message and exit code 2.
"""

from __future__ import annotations

#: top-level module -> the extra that installs it
EXTRA_OF: dict[str, str] = {
    "torch": "hf", "transformers": "hf", "gguf": "hf", "safetensors": "hf", "accelerate": "hf",
    "openai": "api", "anthropic": "api",
    "matplotlib": "report",
    "starlette": "web", "fastapi": "web", "uvicorn": "web", "jinja2": "web", "sqlalchemy": "web",
    "psycopg": "web", "multipart": "web", "python_multipart": "web",
    "inspect_ai": "inspect",
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""

    def __init__(self, module: str, extra: str | None = None, what: str | None = None):
        self.module = module
        self.extra = extra or EXTRA_OF.get(module.split(".")[0])
        need = f" ({what})" if what else ""
        if self.extra:
            msg = (f"the optional dependency {module!r} is not installed{need}; "
                   f"install it with: pip install 'casebench[{self.extra}]'")
        else:
            msg = f"the dependency {module!r} is not installed{need}; install it with pip"
        super().__init__(msg, name=module)


def missing_extra(error: ModuleNotFoundError, what: str | None = None) -> MissingExtra | None:
    """The ``MissingExtra`` for a failed import of a known optional module, else None (a missing
    casebench module or an unknown one is a bug, not an extra to install)."""
    name = (error.name or "").split(".")[0]
    if name in EXTRA_OF:
        return MissingExtra(error.name or name, what=what)
    return None
