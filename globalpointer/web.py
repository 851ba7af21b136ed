"""Outgoing HTTP: the one path every request to another server goes through (Label Studio's API, the
public datasets' downloads): addresses checked whole before use, bounds per request (a deadline for the
whole answer, its bytes), and every failure one ``OutgoingError`` naming the address and what to
check, with what the other side said cut and its credentials redacted."""
import http.client
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional, Sequence, Tuple

from .errors import UserError


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects followed only to http(s), and the Authorization header sent on only within the origin
    the request was made to."""

    def redirect_request(self, request, fp, code, message, headers, new_url):
        target, source = urllib.parse.urlsplit(new_url), urllib.parse.urlsplit(request.full_url)
        if target.scheme not in ("http", "https"):
            raise urllib.error.URLError(f"redirect to a {target.scheme}: URL refused")
        redirected = super().redirect_request(request, fp, code, message, headers, new_url)
        if redirected is not None and (target.scheme, target.netloc) != (source.scheme, source.netloc):
            for name in list(redirected.headers):
                if name.lower() == "authorization":
                    del redirected.headers[name]
            redirected.unredirected_hdrs.pop("Authorization", None)
        return redirected


OPENER = urllib.request.build_opener(SameOriginRedirects)


class OutgoingError(UserError):
    """A request to another server failed; the message names the address, never a credential."""


# What a message may quote of another server's answer: enough to say what went wrong
QUOTED_CHARS = 300
# The shortest piece of a secret that is redacted where a read cut the secret (shorter ones are too
# likely to be ordinary text)
SECRET_PIECE = 4
# Credentials as they appear in echoed requests and error bodies: header values, key=value, JSON fields
CREDENTIALS = re.compile(r"(?i)((?:authorization|cookie|set-cookie|x-api-key|proxy-authorization)\s*[:=]\s*)[^\r\n,}]*|"
                         r"((?:token|bearer|basic)\s+)[A-Za-z0-9._~+/=-]{6,}|"
                         r"((?:\"|')?(?:access|refresh|token|api_key|apikey|password|secret|access_token)(?:\"|')?"
                         r"\s*[:=]\s*(?:\"|')?)[^\"'&\s,}]+")


def redacted(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` cut to QUOTED_CHARS with every credential in it replaced by [redacted]: the ``secrets``
    themselves wherever they appear, in any case, and a piece of one at the text's start or end (a body
    cut by the read); and what looks like one (Authorization and Cookie values, token=..., "access": ...).
    Redacted first, then cut: a cut never splits a secret into what the patterns no longer see."""
    for secret in secrets:
        if secret:
            text = re.sub(re.escape(secret), "[redacted]", text, flags=re.IGNORECASE)
            for size in range(len(secret) - 1, SECRET_PIECE - 1, -1):  # the read cut it: its head, or its tail
                if text.lower().endswith(secret[:size].lower()):
                    text = text[:-size] + "[redacted]"
                if text.lower().startswith(secret[-size:].lower()):
                    text = "[redacted]" + text[size:]
    text = CREDENTIALS.sub(lambda m: (m.group(1) or m.group(2) or m.group(3)) + "[redacted]", text)
    return text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "..."


def check_address(url: str, where: str) -> urllib.parse.SplitResult:
    """An http(s) URL with a host and, if any, a port that is a number in range: checked whole when a
    command starts, so that a typo is one line then, not a failure of every later request."""
    try:
        parts = urllib.parse.urlsplit(str(url).strip())
        port = parts.port  # a non-numeric or out-of-range port is a ValueError here
        hostname = parts.hostname
    except ValueError as error:
        raise OutgoingError(f"{where}: {url!r} is no valid address ({error}); e.g. http://127.0.0.1:8080") from None
    if parts.scheme not in ("http", "https") or not hostname or port == 0:
        raise OutgoingError(f"{where}: {url!r} needs http:// or https://, a host and a port between 1 and 65535 "
                            f"if any, e.g. http://127.0.0.1:8080")
    if any(char.isspace() or ord(char) < 32 for char in str(url).strip()):
        raise OutgoingError(f"{where}: {url!r} holds a space or a control character, which no address has (every "
                            f"request to it would fail); e.g. http://127.0.0.1:8080")
    return parts


def fetch(request, timeout: float, max_bytes: int, what_to_check: str, deadline_s: Optional[float] = None,
          secrets: Sequence[str] = (), min_rate: Optional[Tuple[int, float]] = None) -> bytes:
    """The body of ``request`` (a URL or a ``urllib.request.Request``), at most ``max_bytes`` and, with
    ``deadline_s``, all of it within that many seconds (each read also within ``timeout``); with
    ``min_rate`` (bytes, seconds), at least that many bytes in every such span.  Every way it can fail
    (refused, timed out, an HTTP error status, a protocol error, a bad URL, too big, too slow) is one
    OutgoingError that names the address and ``what_to_check``; an error body is quoted cut and
    redacted (``secrets``: values that must never appear, such as the token sent)."""
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    shown = redacted(url, secrets)
    started = time.monotonic()
    span_started, span_size = started, 0  # the span min_rate is measured over
    try:
        with OPENER.open(request, timeout=timeout) as answer:
            chunks, size = [], 0
            while True:
                # read1: what has arrived, so the deadline is checked as bytes drip in (read(n) waits for all n)
                chunk = answer.read1(min(1 << 20, max_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:
                    raise OutgoingError(f"{shown}: the answer is over {max_bytes:,} bytes; check {what_to_check}")
                now = time.monotonic()
                if deadline_s is not None and now - started > deadline_s:
                    raise OutgoingError(f"{shown}: the answer took over {deadline_s:g} s; check {what_to_check} "
                                        f"(a mirror that is too slow: download the file another way)")
                if min_rate is not None and now - span_started >= min_rate[1]:
                    if size - span_size < min_rate[0]:
                        raise OutgoingError(f"{shown}: {size - span_size:,} bytes arrived in {now - span_started:.0f} s "
                                            f"(under {min_rate[0]:,} in {min_rate[1]:g} s); check {what_to_check} (a "
                                            f"mirror that is too slow: download the file another way)")
                    span_started, span_size = now, size
            return b"".join(chunks)
    except urllib.error.HTTPError as error:
        try:
            detail = error.read(QUOTED_CHARS * 2).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException):
            detail = ""
        said = f": {redacted(detail, secrets)}" if detail.strip() else ""
        raise OutgoingError(f"{shown}: HTTP {error.code}{said}; check {what_to_check}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:  # timeouts are OSError
        reason = getattr(error, "reason", None) or error.__class__.__name__
        raise OutgoingError(f"{shown}: no usable answer ({redacted(str(reason), secrets)}); "
                            f"check {what_to_check}") from None
