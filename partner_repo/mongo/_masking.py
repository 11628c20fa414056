"""Masking credentials in connection strings, and in any text that may quote one, before it is shown.

A URI reaches error messages and log lines in whatever shape the operator typed it, malformed ones included
(``mongodb:/user:secret@host``, ``user:secret@host``, an unescaped ``@``, ``?`` or ``/`` in the password),
and the driver's own messages may quote parts of it. So masking does not parse the URI the way the driver
would; it finds every span that could hold a secret and masks it, erring on the side of masking:

- the password: from the first ``:`` of the user information to the *last* ``@`` (a password may hold
  ``@``, ``?``, ``/``); in a malformed URI, user information without a ``:`` is masked whole;
- the value of every option whose name looks secret (``...password...``, ``...token...``, ``...secret...``,
  ``...key...``, ``authMechanismProperties``), wherever a ``?``, ``&`` or ``;`` starts it;
- a query component without ``=`` (the tail of a value holding an unescaped ``&``);
- in a URI without ``@``, after a host, a "port" that is not a number, to the end (``mongodb://user:secret``
  with the ``@host`` forgotten). After the last ``@`` a port is a port, shown as written, so the error about a
  bad one can say which it is.

:func:`scrub` masks text: every URI-looking word in it, and every secret of the URIs this process connected
with (:func:`remember_secrets`) wherever it stands as itself (not as letters of a longer word: a password
``p`` leaves ``Timestamp`` alone), so driver messages and log lines cannot show one either. Every record of a
``partner_repo`` logger (migrations included) is scrubbed as it is made, message and traceback, before any
handler sees it: each carries the one :data:`SECRETS` filter (:func:`library_logger`). Importing the library
changes nothing else: no record factory, no handler. :class:`SecretsFilter` does the same for a handler of
yours that shows other loggers' records (the driver's own, for instance).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

MASK = "***"

_SCHEME = re.compile(r"(?i)mongodb(?:\+srv)?://")
"""Only MongoDB's schemes are read strictly: ``app://A@db`` could also be user ``app``, password ``//A``."""
_LOOSE_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*(?::/{1,2}|/{1,2})")
_SECRET_NAME = re.compile(r"(?i)pass|pwd|secret|token|credential|key|signature|authmechanismproperties")
_OPTION = re.compile(r"(?<=[?&;])(?P<name>[^?&;=]*)=(?P<value>[^&;]*)")
_URI_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/{1,2}[^\s'\"<>]*|[^\s'\"<>:/@]+:[^\s'\"<>]*@[^\s'\"<>]*")

_known_secrets: set[str] = set()


def mask_uri(uri: str) -> str:
    """The URI with everything that could be a credential replaced by ``***``, whatever its shape."""
    return _masked(uri, secret_spans(uri))


def secret_spans(uri: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of ``uri`` that may hold a secret (see the module docstring)."""
    strict = _SCHEME.match(uri)
    loose = strict or _LOOSE_SCHEME.match(uri)
    prefix = loose.end() if loose else 0
    at = uri.rfind("@")
    spans = _userinfo(uri, prefix, at, strict is None)
    if loose is not None and strict is None:
        # ``app:/A:@db`` may be a loose scheme, or user ``app`` with password ``/A:``: mask both readings
        spans += _userinfo(uri, 0, at, True)
    hosts = at + 1 if at >= prefix else prefix
    first_question = uri.find("?", prefix)
    if first_question >= 0:
        for option in _OPTION.finditer(uri, first_question):
            if _SECRET_NAME.search(option["name"]):
                spans.append(option.span("value"))
    query = uri.find("?", hosts)
    if query >= 0:
        spans += _bare_components(uri, query + 1)
    if at < prefix:  # no user information: the "host:port" may be "user:password" with "@host" forgotten
        spans += _odd_port(uri, hosts, query)
    return spans


def _userinfo(uri: str, prefix: int, at: int, malformed: bool) -> list[tuple[int, int]]:
    """The password span of the user information between ``prefix`` and the last ``@``: from its first
    ``:``; a malformed URI's user information without one is masked whole."""
    if at < prefix:
        return []
    colon = uri.find(":", prefix, at)
    if colon >= 0:
        return [(colon + 1, at)]
    return [(prefix, at)] if malformed and at > prefix else []


def scrub(text: str, uri: str | None = None) -> str:
    """``text`` with every URI-looking word masked and every known secret (of ``uri``, and of the URIs this
    process connected with) replaced by ``***``: for driver messages that may quote a connection string."""
    secrets = set(_known_secrets)
    if uri is not None:
        secrets |= _secrets_of(uri)
    text = _URI_IN_TEXT.sub(_masked_word, text)
    for secret in sorted(secrets, key=len, reverse=True):
        text = _standing(secret).sub(MASK, text)
    return text


def _standing(secret: str) -> re.Pattern[str]:
    """Where ``secret`` stands in text as itself, not as letters of a longer word: a password ``p`` is masked
    in ``password 'p'``, never in ``Timestamp`` or ``operationTime``."""
    before = r"(?<!\w)" if re.match(r"\w", secret[0]) else ""
    after = r"(?!\w)" if re.match(r"\w", secret[-1]) else ""
    return re.compile(before + re.escape(secret) + after)


def remember_secrets(uri: str) -> None:
    """Mask the secrets of ``uri`` in everything :func:`scrub` cleans from now on (the process connected with
    it, so driver messages may quote them)."""
    _known_secrets.update(_secrets_of(uri))


def scrub_record(record: logging.LogRecord) -> None:
    """Scrub a log record's message and traceback in place (:func:`scrub`); a traceback another handler
    already formatted (``exc_text``) is scrubbed too."""
    message = record.getMessage()
    cleaned = scrub(message)
    if cleaned != message:
        record.msg, record.args = cleaned, None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = scrub(record.exc_text)


class SecretsFilter(logging.Filter):
    """Scrubs every record it sees: put it on a handler that also shows other loggers' records (the driver's
    own, for instance)."""

    def filter(self, record: logging.LogRecord) -> bool:
        scrub_record(record)
        return True


SECRETS = SecretsFilter()
"""The one filter on every logger of the library (:func:`library_logger`)."""


def library_logger(name: str) -> logging.Logger:
    """The library's logger ``name`` (a ``partner_repo`` name), whose records are scrubbed of credentials
    (:data:`SECRETS`) as they are made, before any handler sees them.

    A logger's filters see only the records logged on that very logger, not those of its children, so each
    logger of the library carries the filter itself; nothing outside the library's own loggers is touched
    (an application's handlers that also show the driver's records can take a :class:`SecretsFilter`)."""
    logger = logging.getLogger(name)
    if SECRETS not in logger.filters:
        logger.addFilter(SECRETS)
    return logger


def _masked_word(match: re.Match[str]) -> str:
    """A URI found in text, masked; punctuation that ends the sentence around it is kept."""
    word = match.group()
    uri = word.rstrip(":,.;)")
    return mask_uri(uri) + word[len(uri) :]


def _secrets_of(uri: str) -> set[str]:
    found = {uri[start:end] for start, end in secret_spans(uri)}
    found |= {unquote(secret) for secret in found}
    return {secret for secret in found if secret and secret != MASK}


def _bare_components(uri: str, start: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for component in re.finditer(r"[^&;]+", uri[start:]):
        if "=" not in component.group():
            spans.append((start + component.start(), start + component.end()))
    return spans


def _odd_port(uri: str, hosts: int, query: int) -> list[tuple[int, int]]:
    """From the ``:`` of a host whose port is not a number to the end of the text."""
    end = min((i for i in (uri.find("/", hosts), query) if i >= 0), default=len(uri))
    position = hosts
    for host in uri[hosts:end].split(","):
        colon = host.find(":", host.find("]") + 1 if host.startswith("[") else 0)
        if colon >= 0 and not host[colon + 1 :].isdigit():
            return [(position + colon + 1, len(uri))]
        position += len(host) + 1
    return []


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the (possibly overlapping) spans replaced by one ``***`` each run."""
    merged: list[list[int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, position = [], 0
    for start, end in merged:
        pieces += [text[position:start], MASK]
        position = end
    return "".join([*pieces, text[position:]])


__all__ = [
    "MASK",
    "SecretsFilter",
    "SECRETS",
    "library_logger",
    "mask_uri",
    "remember_secrets",
    "scrub",
    "scrub_record",
    "secret_spans",
]
