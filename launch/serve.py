"""Serves a leaderboard page folder over HTTP (the page also works opened from disk).

  python -m launch.serve --dir runs/leaderboard/leaderboard [--port 8000] [--host 0.0.0.0]

Only files under --dir are served: for the links to the benchmarks' reports ("../...") to work,
serve a parent folder and open the page's path under it.
"""
from __future__ import annotations

import functools
import http.server
import os

from absl import flags
from launch import cli

_DIR = flags.DEFINE_string("dir", None, "the folder to serve (holds index.html)",
                           required=True)
_PORT = flags.DEFINE_integer("port", 8000, "TCP port")
_HOST = flags.DEFINE_string("host", "127.0.0.1", "address to listen on (0.0.0.0: all)")


def main(argv) -> None:
  del argv
  folder = os.path.abspath(_DIR.value)
  if not os.path.isfile(os.path.join(folder, "index.html")):
    what = "has no index.html" if os.path.isdir(folder) else "is not a directory"
    raise cli.InputError(f"launch.serve: {folder} {what}")
  handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=folder)
  with http.server.ThreadingHTTPServer((_HOST.value, _PORT.value), handler) as server:
    print(f"serving {folder} at http://{_HOST.value}:{_PORT.value}/ (Ctrl-C stops)", flush=True)
    try:
      server.serve_forever()
    except KeyboardInterrupt:
      pass  # Stopping the server is the normal way to end it, not an interruption.


if __name__ == "__main__":
  cli.run(main)
