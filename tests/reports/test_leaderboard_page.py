"""The static leaderboard page: its files (fast) and the page itself in headless Chromium.

The browser test skips where Chromium, chromedriver or selenium is missing, unless
$VCBENCH_REQUIRE_BROWSER=1 (CI), where that is a failure.
"""
from __future__ import annotations

import copy
import csv
import json
import math
import os
import struct
import subprocess
import sys
import urllib.parse

import pytest

from launch import leaderboard_screenshot
from vcbench.reports import leaderboard_page

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PVRS = ("in1k_mobilenetv2", "random_vit_s", "mae_vit_ti", "state_oracle")
# cortexbench.mean_success per PVR (None: no result); no ties, so every order is unique.
SUCCESS = {"in1k_mobilenetv2": 54.2, "random_vit_s": None, "mae_vit_ti": 61.0,
           "state_oracle": 12.5}


def _col(key, label, unit="", digits=1, higher=True):
  return {"key": key, "label": label, "unit": unit, "digits": digits,
          "higher_is_better": higher, "help": f"what {label} means"}


def _table():
  benchmarks = [
      {"key": "cortexbench", "name": "CortexBench", "report": "../cortexbench/report/report.md",
       "columns": [_col("cortexbench.mean_success", "Mean success", "%"),
                   _col("cortexbench.mean_rank", "Mean rank", digits=2, higher=False)]},
      {"key": "gvue", "name": "G-VUE", "report": None,
       "columns": [_col("gvue.summary", "Summary", digits=3), _col("gvue.act", "Act")]},
      {"key": "robustnav", "name": "RobustNav", "report": None,
       "columns": [_col("robustnav.drop", "Success drop", "%", higher=False)]},
  ]
  rows = []
  for i, pvr in enumerate(PVRS):
    success = SUCCESS[pvr]
    rows.append({
        "pvr": pvr,
        "overall_rank": None if success is None else 1.5 + i,
        "values": {"cortexbench.mean_success": success,
                   "cortexbench.mean_rank": None if success is None else 4.0 - success / 20,
                   "gvue.summary": 0.1 * (i + 1), "gvue.act": None if i == 0 else 10.0 * i,
                   "robustnav.drop": 5.0 + i},
        "errors": {"cortexbench.mean_success": 3.1} if success is not None else {},
        "links": {b["key"]: {"records": f"records/{pvr}/{b['key']}.jsonl",
                             "config": f"configs/{b['key']}.json"} for b in benchmarks},
        "provenance": {"code_version": "9dddde7", "checkpoint": f"/ckpt/{pvr}.pth",
                       "checkpoint_sha256": "ab12" * 16,
                       "config_hash": {b["key"]: f"{b['key'][:2]}3f2a" for b in benchmarks}},
    })
  return {"title": "vcbench leaderboard", "variant": "quick",
          "generated": "2026-12-08T01:23:45Z", "code_version": "9dddde7 (clean)",
          "notes": ["quick variant: reduced protocols", "a second note"],
          "benchmarks": benchmarks, "rows": rows}


def _data(out):
  text = (out / "data.js").read_text(encoding="utf-8")
  prefix = leaderboard_page.DATA_PREFIX
  assert text.startswith(prefix) and text.rstrip().endswith(";")
  # parse_constant refuses NaN/Infinity, as a browser's JSON.parse would.
  return json.loads(text[len(prefix):].rstrip().rstrip(";"),
                    parse_constant=lambda c: pytest.fail(f"{c} in data.js"))


def _has_parquet():
  try:
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
  except ImportError:
    return False
  return True


def test_write_page_writes_the_page_and_the_data(tmp_path):
  table = _table()
  index = leaderboard_page.write_page(table, tmp_path)
  assert index == tmp_path / "index.html"
  for name in ("index.html", "data.js", "assets/leaderboard.js", "assets/leaderboard.css",
               "leaderboard.csv"):
    assert (tmp_path / name).is_file(), name
  assert _data(tmp_path) == table
  html = index.read_text(encoding="utf-8")
  assert "<title>vcbench leaderboard</title>" in html and 'href="data:,"' in html
  assert '<script src="data.js">' in html and "leaderboard.csv" in html
  assert ("leaderboard.parquet" in html) == _has_parquet()
  assert "fetch(" not in (tmp_path / "assets/leaderboard.js").read_text(encoding="utf-8")
  assert not [p for p in tmp_path.rglob(".tmp-*")], "atomic writes left temporary files"


def test_csv_has_one_row_per_pvr(tmp_path):
  leaderboard_page.write_page(_table(), tmp_path)
  with open(tmp_path / "leaderboard.csv", newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert [r["pvr"] for r in rows] == list(PVRS)
  by_pvr = {r["pvr"]: r for r in rows}
  first = by_pvr["in1k_mobilenetv2"]
  assert float(first["cortexbench.mean_success"]) == 54.2
  assert float(first["cortexbench.mean_success.error"]) == 3.1
  assert float(first["overall_rank"]) == 1.5 and first["gvue.act"] == ""
  assert by_pvr["random_vit_s"]["cortexbench.mean_success"] == ""
  assert by_pvr["random_vit_s"]["overall_rank"] == ""
  assert first["checkpoint"] == "/ckpt/in1k_mobilenetv2.pth"
  assert first["config_hash.gvue"] == "gv3f2a" and first["code_version"] == "9dddde7"


def test_parquet_round_trips(tmp_path):
  pd = pytest.importorskip("pandas")
  pytest.importorskip("pyarrow")
  leaderboard_page.write_page(_table(), tmp_path)
  frame = pd.read_parquet(tmp_path / "leaderboard.parquet")
  from_csv = pd.read_csv(tmp_path / "leaderboard.csv")
  assert list(frame["pvr"]) == list(PVRS)
  assert list(frame.columns) == list(from_csv.columns)
  pd.testing.assert_frame_equal(frame, from_csv, check_dtype=False)


def test_without_pandas_there_is_no_parquet_and_no_link(tmp_path, monkeypatch):
  (tmp_path / "leaderboard.parquet").write_bytes(b"stale")
  monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError.
  index = leaderboard_page.write_page(_table(), tmp_path)
  assert not (tmp_path / "leaderboard.parquet").exists()
  assert "parquet" not in index.read_text(encoding="utf-8")


def test_nan_and_infinity_are_written_as_null(tmp_path):
  table = _table()
  row = table["rows"][0]
  row["values"]["cortexbench.mean_success"] = float("nan")
  row["errors"]["cortexbench.mean_success"] = float("inf")
  row["overall_rank"] = -math.inf
  leaderboard_page.write_page(table, tmp_path)
  written = _data(tmp_path)["rows"][0]
  assert written["values"]["cortexbench.mean_success"] is None
  assert written["errors"]["cortexbench.mean_success"] is None
  assert written["overall_rank"] is None
  with open(tmp_path / "leaderboard.csv", newline="", encoding="utf-8") as f:
    first = next(csv.DictReader(f))
  assert first["cortexbench.mean_success"] == "" and first["overall_rank"] == ""


@pytest.mark.parametrize("break_it, message", [
    (lambda t: t.pop("rows"), "missing keys"),
    (lambda t: t["benchmarks"][1]["columns"].append(_col("gvue.act", "Again")), "twice"),
    (lambda t: t["rows"][0]["values"].update({"nope.x": 1.0}), "unknown columns"),
    (lambda t: t["rows"].append(copy.deepcopy(t["rows"][0])), "more than one row"),
])
def test_an_inconsistent_table_is_refused_before_writing(tmp_path, break_it, message):
  table = _table()
  break_it(table)
  with pytest.raises(ValueError, match=message):
    leaderboard_page.write_page(table, tmp_path / "page")
  assert not (tmp_path / "page").exists()


def test_serve_refuses_a_folder_without_a_page(tmp_path):
  out = subprocess.run([sys.executable, "-m", "launch.serve", f"--dir={tmp_path}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  assert out.returncode == 2
  assert out.stderr.strip() == f"error: launch.serve: {tmp_path} has no index.html"


# The browser test.

def _browser_or_skip():
  problem = leaderboard_screenshot.browser_problem()
  if problem is None:
    return
  if os.environ.get("VCBENCH_REQUIRE_BROWSER", "") not in ("", "0"):
    pytest.fail(f"VCBENCH_REQUIRE_BROWSER is set, but {problem}", pytrace=False)
  pytest.skip(f"no headless browser: {problem}")


def _console_problems(driver):
  return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def _shown_order(driver):
  from selenium.webdriver.common.by import By  # pylint: disable=import-outside-toplevel
  return [tr.get_attribute("data-pvr")
          for tr in driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")]


def _expected_order(descending):
  have = [p for p in PVRS if SUCCESS[p] is not None]
  ordered = sorted(have, key=lambda p: SUCCESS[p], reverse=descending)
  return ordered + [p for p in PVRS if SUCCESS[p] is None]  # Missing values last, always.


def _click_sort(driver, key):
  from selenium.webdriver.common.by import By  # pylint: disable=import-outside-toplevel
  header = driver.find_element(By.CSS_SELECTOR, f'#leaderboard th[data-key="{key}"]')
  header.find_element(By.TAG_NAME, "button").click()
  return header


def _file_of(href):
  url = urllib.parse.urlparse(href)
  assert url.scheme == "file", href
  return urllib.parse.unquote(url.path)


def _png_size(path):
  data = path.read_bytes()
  assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
  width, height = struct.unpack(">II", data[16:24])  # The IHDR chunk comes first.
  return len(data), width, height


def test_page_in_headless_chromium(tmp_path):
  _browser_or_skip()
  from selenium.webdriver.common.by import By  # pylint: disable=import-outside-toplevel

  table = _table()
  out = tmp_path / "leaderboard"
  index = leaderboard_page.write_page(table, out)
  for row in table["rows"]:  # The link targets: write_page's caller makes them.
    for link in row["links"].values():
      for rel in link.values():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("{}\n", encoding="utf-8")

  driver = leaderboard_screenshot.start_browser()
  try:
    driver.get(index.as_uri())
    assert _console_problems(driver) == []
    assert driver.find_element(By.ID, "subtitle").text.startswith("quick variant")
    # The initial order is the overall rank, missing last.
    assert _shown_order(driver) == [p for p in PVRS if SUCCESS[p] is not None] + ["random_vit_s"]

    # Higher is better: the first click sorts best (highest) first, the second reverses.
    header = _click_sort(driver, "cortexbench.mean_success")
    assert _shown_order(driver) == _expected_order(descending=True)
    assert header.get_attribute("aria-sort") == "descending"
    assert "\u25BC" in header.text
    header = _click_sort(driver, "cortexbench.mean_success")
    assert _shown_order(driver) == _expected_order(descending=False)
    assert header.get_attribute("aria-sort") == "ascending"
    other = driver.find_element(By.CSS_SELECTOR, '#leaderboard th[data-key="overall_rank"]')
    assert other.get_attribute("aria-sort") is None

    # A value: formatted, linked to its records and config; the best one bold; missing is "—".
    row = '#leaderboard tr[data-pvr="in1k_mobilenetv2"] td[data-key="cortexbench.mean_success"]'
    cell = driver.find_element(By.CSS_SELECTOR, row)
    value = cell.find_element(By.CSS_SELECTOR, "a.value")
    assert value.text == "54.2% \u00B1 3.1"
    assert os.path.isfile(_file_of(value.get_attribute("href")))
    assert os.path.isfile(_file_of(cell.find_element(By.CSS_SELECTOR, "a.config")
                                   .get_attribute("href")))
    best = driver.find_elements(By.CSS_SELECTOR, 'td.best[data-key="cortexbench.mean_success"]')
    assert [c.find_element(By.XPATH, "..").get_attribute("data-pvr") for c in best] == [
        "mae_vit_ti"]
    missing = driver.find_element(
        By.CSS_SELECTOR, '#leaderboard tr[data-pvr="random_vit_s"] '
        'td[data-key="cortexbench.mean_success"]')
    assert missing.text == "\u2014" and not missing.find_elements(By.TAG_NAME, "a")

    # One bar chart per column, a bar per PVR with a value; the notes.
    keys = [c["key"] for b in table["benchmarks"] for c in b["columns"]]
    plots = driver.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert [p.get_attribute("data-column") for p in plots] == keys
    assert len(plots[0].find_elements(By.CSS_SELECTOR, "rect.bar")) == 3
    notes = driver.find_elements(By.CSS_SELECTOR, "#notes li")
    assert [n.text for n in notes] == table["notes"]
    assert _console_problems(driver) == []

    # The screenshot covers the whole document, not just the first screen.
    page_height = driver.execute_script("return document.documentElement.scrollHeight")
    shot = leaderboard_screenshot.full_page_screenshot(driver, tmp_path / "page.png")
    size, width, height = _png_size(shot)
    assert size > 20_000 and width >= 1000 and height >= page_height, (size, width, height)
  finally:
    driver.quit()
