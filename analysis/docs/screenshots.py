"""Makes the section screenshots shown in analysis/README.md: renders a report in headless
Chromium at 1280 px, crops each section, halves it (2x2 mean) and writes docs/report-ID.png.

    python3 analysis/docs/screenshots.py report.html analysis/docs
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import browser  # noqa: E402

from dtbench_analysis.plotting import plt  # noqa: E402

SHOWN = ("study", "time", "scaling", "ranks", "strategies", "pipelines", "resources")
MAX_HEIGHT = 1300      # CSS pixels of a section kept (long sections are cut)


def main(page: str, folder: str, width: int = 1280) -> None:
    work = os.path.join(folder, ".work")
    os.makedirs(work, exist_ok=True)
    page = browser.unfolded(page, work)          # folded sections are shown too
    lay = browser.layout(page, work, width)
    image = plt.imread(browser.screenshot(page, work, width, int(lay["height"]) + 10))[..., :3]
    for s in lay["sections"]:
        if s["id"] not in SHOWN:
            continue
        b = s["box"]
        top, h = int(b["top"]), min(int(b["height"]), MAX_HEIGHT)
        crop = image[top:top + h, int(b["left"]):int(b["left"] + b["width"])]
        crop = crop[:crop.shape[0] // 2 * 2, :crop.shape[1] // 2 * 2]
        half = crop.reshape(crop.shape[0] // 2, 2, crop.shape[1] // 2, 2, 3).mean(axis=(1, 3))
        levels = np.round(half * 31) / 31          # fewer colours: smaller PNG files
        out = os.path.join(folder, f"report-{s['id']}.png")
        plt.imsave(out, levels)
        print(f"{out}: {os.path.getsize(out) // 1024} KiB")
    for name in os.listdir(work):
        os.remove(os.path.join(work, name))
    os.rmdir(work)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
