"""web.py: the one path of outgoing HTTP: bounds per request, one error for every failure, no credential quoted."""
import http.server
import threading
import time

import pytest

from globalpointer.web import OutgoingError, check_address, fetch, redacted


def test_credentials_are_redacted_wherever_they_appear():
    echoed = ('GET /x HTTP/1.1\nAuthorization: Token abc123456789\nCookie: sessionid=zzz\n'
              '{"access": "eyJhbGciOi.x.y", "refresh": "r3fresh-t0ken"} api_key=k3y-value')
    shown = redacted(echoed, ["abc123456789"])
    for secret in ("abc123456789", "sessionid=zzz", "eyJhbGciOi", "r3fresh-t0ken", "k3y-value"):
        assert secret not in shown
    assert len(redacted("x" * 5000)) <= 303


@pytest.mark.parametrize("url", ["http://127.0.0.1:abc", "http://[::1", "ftp://host/x", "http://", "http://h:0",
                                 "http://a b", "http://host:8080/pa th", "http://host\t:80"])
def test_an_address_is_checked_whole(url):
    with pytest.raises(OutgoingError, match="--from"):
        check_address(url, "--from")


class Drip(http.server.BaseHTTPRequestHandler):
    """Answers one byte at a time, well within any per-read timeout, forever (a slow or hostile mirror)."""

    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        try:
            while True:
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.mark.slow  # waits out deadlines
def test_a_download_has_a_deadline_a_rate_floor_and_a_size_bound():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/set.zip"
    started = time.monotonic()
    with pytest.raises(OutgoingError, match=r"set.zip: the answer took over 1 s"):
        fetch(url, timeout=5, max_bytes=10 ** 9, what_to_check="the mirror", deadline_s=1)
    assert time.monotonic() - started < 5
    started = time.monotonic()  # about 20 bytes a second: under 1,000 in any second
    with pytest.raises(OutgoingError, match=r"set.zip: \d+ bytes arrived in 1 s \(under 1,000 in 1 s\)"):
        fetch(url, timeout=5, max_bytes=10 ** 9, what_to_check="the mirror", deadline_s=60, min_rate=(1000, 1.0))
    assert time.monotonic() - started < 5
    with pytest.raises(OutgoingError, match=r"set.zip: the answer is over 5 bytes"):
        fetch(url, timeout=5, max_bytes=5, what_to_check="the mirror")
    server.shutdown()
    with pytest.raises(OutgoingError, match=r"set.zip: no usable answer"):  # nobody listens any more
        fetch(url, timeout=1, max_bytes=5, what_to_check="the mirror")


def test_a_secret_in_another_case_or_cut_by_the_read_is_redacted_whole():
    secret = "abcdef123456"
    assert "[redacted]" in redacted("token: ABCDEF123456 upper-cased", [secret])
    assert "ABCDEF" not in redacted("token: ABCDEF123456 upper-cased", [secret])
    cut_at_end = redacted("error body ... Authorization token abcdef12", [secret])  # the read ended inside it
    assert "abcdef12" not in cut_at_end and cut_at_end.endswith("[redacted]")
    cut_at_start = redacted("3456 and the rest of the body", [secret])  # the read began inside it
    assert cut_at_start.startswith("[redacted]") and "3456" not in cut_at_start
    assert redacted("nothing of it here", [secret]) == "nothing of it here"
    # redacted, then cut: a secret across the cut is not half shown
    body = "x" * 295 + secret
    assert "abcde" not in redacted(body, [secret])
