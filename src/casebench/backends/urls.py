"""An endpoint's address checked where it is given (``--base-url``, ``$OPENAI_BASE_URL``, a
classifier's ``base_url``): an http(s) URL with a host, or an error naming the value, before any
key is looked up or any request is sent. Stdlib only: the registry's option types and the HTTP
backends both read it."""

from __future__ import annotations

import re
from urllib.parse import urlsplit


def url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as an endpoint (None: nothing): it must be an ``http`` or
    ``https`` URL with a host. Checked before any request and before any key is looked up, so a
    typo is named at once instead of surfacing as retries against nowhere or a missing key."""
    try:
        parts = urlsplit(str(url).strip())
        host = parts.hostname
        parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
    except ValueError as e:
        return f"not a URL ({e})"
    if parts.scheme.lower() not in ("http", "https"):
        return "not an http(s) URL" + (f" (scheme {parts.scheme!r})" if parts.scheme else " (no scheme)")
    if not host:
        return "an http(s) URL without a host"
    return None


def url_as_given(url: str) -> str:
    """``url`` as the user wrote it, less the places credentials hide in (user name and
    password, query string, fragment): how an error names a value it refuses."""
    text = re.sub(r"^([A-Za-z][\w+.-]*://)?[^/@\s]*@", r"\1", str(url).strip())
    return text.split("?", 1)[0].split("#", 1)[0]


def check_base_url(url: str | None, what: str = "--base-url") -> str | None:
    """``url`` when it is an http(s) URL with a host (or None: the provider's default), else
    ``ValueError`` naming ``what`` and the value (a URL's credentials left out)."""
    if url is None:
        return None
    problem = url_problem(url)
    if problem:
        raise ValueError(f"{what} {url_as_given(str(url))!r} is {problem}; give the server's address, "
                         "e.g. http://127.0.0.1:8080/v1 or https://api.openai.com/v1")
    return url
