"""Remake the docs' pictures (docs/images/) from a real result store, e.g. the one ``make demo`` leaves:

    .venv/bin/python docs/make_pictures.py --db out/demo.db [--run 1] [--ndr-run 2]

* ``report-page.png``: the run's HTML page (``labctl report --html``) in headless Chromium, 1280 wide;
* ``ndr-page.png``: the NDR run's page down to its loss-against-load plot (a log axis around the bounds);
* ``rings-loss.png``: ``labctl plot`` of the run's loss against the ring size;
* ``tui-results.svg``, ``tui-advice.svg``: the TUI's Results and Advice screens on that store (Textual's own
  SVG screenshot, 120x40).

Nothing is drawn by hand: every picture is labctl's own output on the stored trials. Needs Debian's
chromium (scripts/apt-packages.txt).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labctl import api  # noqa: E402

OUT = ROOT / "docs" / "images"
CHROMIUM = ("chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--hide-scrollbars")


def screenshot(page: Path, png: Path, height: int) -> None:
    """The page's top in headless Chromium at 1280 x ``height`` (a fragment does not scroll a headless
    screenshot: it draws the page's top blank)."""
    if shutil.which("chromium") is None:
        raise SystemExit("make_pictures: chromium is not installed (apt-get install chromium)")
    url = page.resolve().as_uri()
    subprocess.run([*CHROMIUM, f"--screenshot={png}", f"--window-size=1280,{height}", url], check=True,
                   capture_output=True, timeout=120)
    print(f"wrote {png}")


async def tui_screens(db: Path, run: int) -> None:
    from labctl.tui.app import LabctlApp

    for mode, name in (("results", "tui-results.svg"), ("advice", "tui-advice.svg")):
        app = LabctlApp(db=db, profiles_dir=ROOT / "domains", poll_s=None, mode=mode, handle_signals=False)
        async with app.run_test(size=(120, 40)) as pilot:
            app.run_id = run
            for _ in range(40):  # the screens load in a worker: wait until it has drawn
                await pilot.pause(0.1)
            app.save_screenshot(filename=name, path=str(OUT))
        print(f"wrote {OUT / name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="the result store (make demo: out/demo.db)")
    parser.add_argument("--run", type=int, default=1, help="the sweep run to picture (make demo: 1)")
    parser.add_argument("--ndr-run", type=int, default=None, help="an NDR run (make demo: 2)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labctl-pictures-") as tmp:
        page = api.report_html(Path(tmp) / "run.html", args.db, args.run)
        screenshot(page, OUT / "report-page.png", 2000)
        if args.ndr_run is not None:
            ndr = api.report_html(Path(tmp) / "ndr.html", args.db, args.ndr_run)
            screenshot(ndr, OUT / "ndr-page.png", 2400)
    print(f"wrote {api.plot('guest.nics.*.rx_queue_size', OUT / 'rings-loss.png', args.db, args.run, 'loss_ratio')}")
    asyncio.run(tui_screens(args.db, args.run))


if __name__ == "__main__":
    main()
