"""What the download tests share: an HTTP server on 127.0.0.1 and a guard
that fails a test which tries to reach any other host."""

import http.server
import threading
import urllib.request


class Server:
  """Serves {path: bytes} on 127.0.0.1; counts requests; can cut a body."""

  def __init__(self):
    self.files, self.truncate, self.requests = {}, set(), []
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):

      def do_GET(self):  # pylint: disable=invalid-name
        server.requests.append(self.path)
        body = server.files.get(self.path)
        if body is None:
          self.send_error(404)
          return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.path in server.truncate:
          self.wfile.write(body[:len(body) // 2])   # then the socket closes
        else:
          self.wfile.write(body)

      def log_message(self, *args):
        pass

    self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
    self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
    self.thread.start()
    self.running = True

  def stop(self):
    if self.running:
      self.httpd.shutdown()
      self.httpd.server_close()
      self.thread.join()
      self.running = False


def local_only(monkeypatch):
  """Makes any URL but 127.0.0.1 fail the test instead of touching the
  network."""
  real = urllib.request.urlopen

  def guarded(request, *args, **kwargs):
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    assert url.startswith("http://127.0.0.1:"), f"test tried to reach {url}"
    return real(request, *args, **kwargs)
  monkeypatch.setattr(urllib.request, "urlopen", guarded)
