"""Renders an HTML page in headless Chromium (Debian package ``chromium``) and reports what a
reader would see: every image with its decoded size (or ``broken``), load errors, console
messages, and a screenshot.

The page itself is not changed: a copy gets two small scripts, one at the start of <head> that
records error events (a broken image fires one), one that after the load event writes the images'
state into an attribute of <body>, which ``--dump-dom`` then shows.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from typing import Dict, Optional

FIRST = ("<script>window.__errs=[];addEventListener('error',function(e){"
         "__errs.push((e.target&&e.target.tagName)||String(e.message));},true);</script>")
LAST = ("<script>addEventListener('load',function(){var im=[].map.call(document.images,"
        "function(i){return {id:i.id,width:(i.complete&&i.naturalWidth)||0,"
        "height:i.naturalHeight||0};});document.body.setAttribute('data-check',"
        "JSON.stringify({images:im,errors:__errs,title:document.title}));});</script>")


def chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(args, timeout=90) -> subprocess.CompletedProcess:
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000"]
    return subprocess.run(base + args, capture_output=True, text=True, timeout=timeout)


def render(page: str, workdir: str) -> Dict[str, object]:
    """Open ``page`` (an HTML file): {"images": [{id, width, height}], "errors": [...],
    "console": [console lines from Chromium's log], "title": str, "screenshot": path}."""
    text = open(page, encoding="utf-8").read()
    probe = os.path.join(workdir, "probe.html")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(text.replace("<head>", "<head>" + FIRST, 1).replace("</body>", LAST + "</body>"))
    dom = _run(["--dump-dom", "file://" + os.path.abspath(probe)])
    m = re.search(r'data-check="([^"]*)"', dom.stdout)
    if not m:
        raise AssertionError(f"Chromium did not render the page (rc {dom.returncode}): "
                             f"{dom.stderr[-2000:]}")
    result = json.loads(html.unescape(m.group(1)))
    result["console"] = [line for line in dom.stderr.splitlines()
                         if "CONSOLE" in line or "Uncaught" in line or
                         "Failed to load resource" in line]
    shot = os.path.join(workdir, "screenshot.png")
    _run(["--window-size=1280,2000", f"--screenshot={shot}", "file://" + os.path.abspath(page)])
    result["screenshot"] = shot if os.path.exists(shot) else None
    return result


LAYOUT = ("<script>addEventListener('load',function(){var y=window.scrollY;"
          "var box=function(e){if(!e)return null;var r=e.getBoundingClientRect();"
          "return {top:r.top+y,left:r.left,width:r.width,height:r.height};};"
          "var s=[].map.call(document.querySelectorAll('section'),function(e){"
          "return {id:e.id,box:box(e),figs:box(e.querySelector('.figs')),"
          "images:e.querySelectorAll('img').length,"
          "folded:!!e.closest('details:not([open])')};});"
          "var im=[].map.call(document.images,function(i){return {id:i.id,"
          "width:(i.complete&&i.naturalWidth)||0,height:i.naturalHeight||0};});"
          "document.body.setAttribute('data-layout',JSON.stringify({sections:s,images:im,"
          "errors:window.__errs,"
          "height:document.documentElement.scrollHeight,"
          "width:document.documentElement.clientWidth}));});</script>")


def layout(page: str, workdir: str, width: int) -> Dict[str, object]:
    """Where each <section> (and its figures block, ``.figs``) lies on the page at a window
    ``width`` pixels wide, in CSS pixels from the top of the page, and whether it is inside a
    closed ``<details>`` (``folded``); the page's height; every image's decoded size and the
    load errors (as ``render``)."""
    text = open(page, encoding="utf-8").read()
    probe = os.path.join(workdir, f"layout{width}.html")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(text.replace("<head>", "<head>" + FIRST, 1).replace("</body>", LAYOUT + "</body>"))
    dom = _run([f"--window-size={width},1000", "--dump-dom", "file://" + os.path.abspath(probe)])
    m = re.search(r'data-layout="([^"]*)"', dom.stdout)
    if not m:
        raise AssertionError(f"Chromium did not lay out the page (rc {dom.returncode}): "
                             f"{dom.stderr[-2000:]}")
    return json.loads(html.unescape(m.group(1)))


def screenshot(page: str, workdir: str, width: int, height: int) -> str:
    """A screenshot of the whole page (window ``width`` x ``height``): the PNG's path."""
    shot = os.path.join(workdir, f"shot{width}.png")
    _run([f"--window-size={width},{height}", f"--screenshot={shot}",
          "file://" + os.path.abspath(page)], timeout=180)
    if not os.path.exists(shot):
        raise AssertionError(f"Chromium wrote no screenshot of {page} at width {width}")
    return shot


def unfolded(page: str, workdir: str) -> str:
    """A copy of ``page`` with every ``<details>`` open (a folded section is laid out and
    painted, so its figures can be measured): the copy's path."""
    text = open(page, encoding="utf-8").read()
    path = os.path.join(workdir, "unfolded.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(re.sub(r"<details(?![^>]*\bopen\b)", "<details open", text))
    return path


def ink(image, box, background=1.0, tolerance=0.1) -> float:
    """Fraction of the pixels inside ``box`` (CSS pixels = image pixels) that differ from the
    white background by more than ``tolerance`` in any channel."""
    import numpy as np
    top, left = int(box["top"]), int(box["left"])
    region = image[top:top + int(box["height"]), left:left + int(box["width"]), :3]
    if region.size == 0:
        return 0.0
    return float((np.abs(region - background) > tolerance).any(axis=2).mean())


def blank_sections(page: str, workdir: str, width: int, minimum: float = 0.03,
                   through_figures: bool = False):
    """Render ``page`` at ``width`` and return (sections whose figures block has less than
    ``minimum`` ink, {section: ink}, layout). Sections without figures are measured over the
    whole section (heading included). ``through_figures``: the screenshot ends 200 px below the
    last figures block (a tall page of tables below its figures costs minutes to paint), and the
    sections that start below it are not measured (absent from the inks); the screenshot is
    ``shot{width}.png`` in ``workdir``."""
    from matplotlib.image import imread
    lay = layout(page, workdir, width)
    height = int(lay["height"]) + 10
    bottoms = [s["figs"]["top"] + s["figs"]["height"] for s in lay["sections"] if s["figs"]]
    if through_figures and bottoms:
        height = min(height, int(max(bottoms)) + 200)
    image = imread(screenshot(page, workdir, width, height))
    inks = {}
    for s in lay["sections"]:
        box = s["figs"] or s["box"]
        if box["top"] < height:
            inks[s["id"]] = ink(image, box)
    return [k for k, v in inks.items() if v < minimum], inks, lay
