"""The connection to Label Studio that training rounds fetch annotations through: its address and
token (from the command line, the environment, or /setup once), and its export API read within bounds."""
import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

from ...errors import UserError
from ...files import parse_json
from ...web import OutgoingError, check_address, fetch

log = logging.getLogger("globalpointer")


def label_studio_address(url: str, where: str) -> str:
    """``url`` as the base of Label Studio's API: http or https with a host, nothing else (a file: URL
    would make a round read a local file, and its token would go wherever the URL says)."""
    try:
        parts = check_address(url, where)  # scheme, host and port
    except OutgoingError as error:
        raise ValueError(str(error)) from None
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{where}: Label Studio's address must be http:// or https:// with a host and no user, "
                         f"query or fragment, e.g. http://127.0.0.1:8080; got {url!r}")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


class LabelStudioConnection:
    """Where Label Studio is and the token its API takes, set once: from the command line and the
    environment, or else by the first ``/setup`` that carries both over an authenticated request.  The
    token is sent to that address only; it is in no log, answer or file of the backend."""

    def __init__(self, url: str = "", token: str = "", setup_allowed: bool = False):
        self.url = label_studio_address(url, "--label-studio-url") if url else ""
        self.token = token
        self.setup_allowed = setup_allowed  # only over basic authentication
        self.lock = threading.Lock()
        self.said_why = False  # Label Studio calls /setup again and again: why it is not used is said once

    @property
    def ready(self) -> bool:
        return bool(self.url and self.token)

    def from_setup(self, hostname, token) -> None:
        """What ``/setup`` sends, taken only if nothing is set yet, both are there, and the request was
        authenticated; a hostname that is no http(s) address is a ValueError (400)."""
        if not (hostname and token) or not isinstance(hostname, str) or not isinstance(token, str):
            return
        url = label_studio_address(hostname, "/setup hostname")
        with self.lock:
            if self.url or self.token:
                return
            if not self.setup_allowed:
                if self.said_why:
                    return
                self.said_why = True
                log.warning("/setup sent Label Studio's address and a token: not used, as the backend does not require "
                         "basic authentication; start it with --label-studio-url and LABEL_STUDIO_API_KEY (or with "
                         "BASIC_AUTH_USER and BASIC_AUTH_PASS)")
                return
            self.url, self.token = url, token
        log.info("Label Studio at %s (from /setup)", url)


# What one export of a project may weigh: past it the round fails (its tasks would not fit a training run anyway)
MAX_EXPORT_BYTES = 1 << 30


def api_headers(token: str, url: str) -> dict:
    """Authorization for Label Studio's API: a personal access token (a JWT) is exchanged for an
    access token first; a legacy token is sent as it is."""
    if token.count(".") != 2:
        return {"Authorization": f"Token {token}"}
    answer = http_json(f"{url}/api/token/refresh", {"refresh": token}, {})
    return {"Authorization": f"Bearer {answer['access']}"}


def http_json(url: str, body: Optional[dict], headers: dict, timeout: float = 120):
    """Label Studio's JSON answer to a request (web.fetch: every failure one error, credentials never quoted)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **headers})
    secrets = [value.split(" ", 1)[-1] for value in headers.values()] + ([body.get("refresh", "")] if body else [])
    content = fetch(request, timeout, MAX_EXPORT_BYTES, secrets=secrets,
                    what_to_check="Label Studio's address (--label-studio-url), its token (LABEL_STUDIO_API_KEY) "
                                  "and that it runs")
    try:
        return parse_json(content)
    except ValueError as error:
        raise UserError(f"Label Studio's answer to {url} is not JSON ({error})") from None


def project_id(project) -> int:
    """The id of a webhook's project: a positive integer (it goes into the export's URL)."""
    if not isinstance(project, dict) or "id" not in project:
        raise ValueError("the event needs its \"project\" object with its \"id\"")
    value = project["id"]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"project.id must be a positive integer, got {value!r}")
    return value
