"""Outgoing HTTP: the one opener every request to another server goes through (Label Studio's API,
the public datasets' downloads)."""
import urllib.error
import urllib.parse
import urllib.request


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
