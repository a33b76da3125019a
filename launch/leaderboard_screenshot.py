"""A screenshot of the whole leaderboard page, taken in headless Chromium.

  python -m launch.leaderboard_screenshot --page runs/leaderboard/leaderboard/index.html \
      --out docs/leaderboard.png

Uses Debian's Chromium and its chromedriver (/usr/bin/chromium, /usr/bin/chromedriver;
launch/setup.sh installs them with the "test" extra) through Selenium. Both paths are given to
Selenium, so it never runs Selenium Manager, which would try to download a browser. The page
test (tests/reports/test_leaderboard_page.py) starts its browser with `start_browser` too.
"""
from __future__ import annotations

import os
import pathlib

from absl import flags
from launch import cli

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1400, 1000


def browser_problem() -> str | None:
  """Why `start_browser` cannot work here (a missing package or binary), or None."""
  try:
    import selenium  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    return "selenium is not installed (pip install 'selenium>=4.20,<5', the \"test\" extra)"
  for path in (CHROMIUM, CHROMEDRIVER):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
      return f"{path} is missing (apt-get install chromium chromium-driver)"
  return None


def start_browser(width: int = WIDTH, height: int = HEIGHT):
  """A headless Chromium WebDriver that records the page's console (driver.get_log("browser")).
  The caller quits it."""
  # pylint: disable=import-outside-toplevel  # selenium is optional (the "test" extra).
  from selenium import webdriver
  from selenium.webdriver.chrome.service import Service

  problem = browser_problem()
  if problem:
    raise cli.InputError(f"no headless browser: {problem}")
  options = webdriver.ChromeOptions()
  options.binary_location = CHROMIUM
  # --no-sandbox: containers and root shells have no user namespaces for Chromium's sandbox.
  for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}"):
    options.add_argument(arg)
  options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
  return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def full_page_screenshot(driver, out: str | os.PathLike[str]) -> pathlib.Path:
  """Grows the window to the document's full height, then saves a PNG of it at `out`."""
  # The window's size includes the browser's frame (emulated in headless mode too), while the
  # screenshot is the viewport: add the difference.
  width, height, frame_w, frame_h = driver.execute_script(
      "const d = document.documentElement; return [d.scrollWidth, d.scrollHeight,"
      " window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight];")
  driver.set_window_size(max(WIDTH, width + frame_w), height + frame_h)
  out = pathlib.Path(out)
  out.parent.mkdir(parents=True, exist_ok=True)
  tmp = out.with_name(f".tmp-{out.name}")  # Renamed into place: never a half-written PNG.
  if not driver.save_screenshot(str(tmp)):
    raise RuntimeError(f"chromium wrote no screenshot for {driver.current_url}")
  os.replace(tmp, out)
  return out


def screenshot(page: str | os.PathLike[str], out: str | os.PathLike[str]) -> pathlib.Path:
  """Opens `page` (an HTML file) from disk and writes the full-page screenshot to `out`."""
  page = pathlib.Path(page).resolve()
  if not page.is_file():
    raise FileNotFoundError(f"{page}: no such page (write the leaderboard first)")
  driver = start_browser()
  try:
    driver.get(page.as_uri())
    return full_page_screenshot(driver, out)
  finally:
    driver.quit()


def define_flags() -> None:
  """Defined only when run as a program, so that importing this module (the page test) never
  clashes with another launch module's --out."""
  flags.DEFINE_string("page", None, "the leaderboard's index.html", required=True)
  flags.DEFINE_string("out", None, "the PNG to write", required=True)


def main(argv) -> None:
  del argv
  path = screenshot(flags.FLAGS.page, flags.FLAGS.out)
  print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
  define_flags()
  cli.run(main)
