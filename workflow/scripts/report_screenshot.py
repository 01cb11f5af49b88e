"""Screenshot a Snakemake HTML report with headless Chromium (Debian's `chromium` package).

    python workflow/scripts/report_screenshot.py results/report.html docs/report.png

The report is a single-page app; the screenshot shows one of its result categories (by default
the per-run metrics table) rather than the start page. The report file itself is not changed:
a copy with two extra lines (size the panes by the window; open that category once the page has
loaded) is rendered.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this repo's package
from wscat.errors import OutputError  # noqa: E402
from wscat.io import check_writable, guard_outputs  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


class BadInput(ValueError):
    """The report given is not one to render (exit 2); Chromium's own trouble is exit 1."""


def find_chromium() -> str | None:
    """The first headless-capable Chromium on PATH, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def screenshot(report: Path, png: Path, *, category: str | None = "Per-run metrics",
               width: int = 1280, height: int = 720, timeout: int = 120) -> Path:
    """Render `report` (opened at `category`, or at its start page when None) into `png`.
    A `png` that is the report, or that cannot be written, is refused before Chromium is sought."""
    guard_outputs({"the report": report}, {"the screenshot": png})
    check_writable(png)
    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError(f"no Chromium on PATH (tried {', '.join(BROWSERS)}); "
                                "on Debian: apt-get install chromium")
    # The report sizes its panes by the screen (100vh), which headless Chromium reports shorter
    # than the window: size them by the window instead.
    extra = ("<style>html, body, #app { height: 100%; } "
             ".h-screen { height: 100% !important; }</style>")
    if category is not None:
        # `app` (the report's React root) exists once the page has rendered; ask until it shows
        # the category (a request made before React has mounted the app is dropped).
        extra += ("<script>(function open(tries) { if (typeof app !== 'undefined' && app "
                  f"&& app.state.category === {json.dumps(category)}) return; "
                  "if (typeof app !== 'undefined' && app && document.querySelector('#app > *')) "
                  f"app.showCategory({json.dumps(category)}); "
                  "if (tries > 0) setTimeout(() => open(tries - 1), 100); })(100);</script>")
    if not report.is_file():
        raise BadInput(f"{report}: no such file (a folder, or missing); give the .html that "
                       "`snakemake --report` wrote (`make report`)")
    try:
        html = report.read_text()
        end = html.rindex("</body>")  # the page's own; bundled scripts contain the string too
    except ValueError:  # no </body>, or not text (a report.zip)
        raise BadInput(f"{report} is not an HTML page; give the .html that "
                       "`snakemake --report` wrote") from None
    html = html[:end] + extra + "\n" + html[end:]
    png = png.resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    # Chromium writes beside `png` under a temporary name, renamed once it is there: an earlier
    # picture at `png` (docs/report.png is committed) never passes for this run's.
    shot = png.with_name(f".{png.name}.tmp{png.suffix}")
    shot.unlink(missing_ok=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            page = Path(tmp) / "report.html"
            page.write_text(html)
            try:
                done = subprocess.run(
                    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     f"--user-data-dir={Path(tmp) / 'profile'}", f"--window-size={width},{height}",
                     "--virtual-time-budget=10000", f"--screenshot={shot}", page.as_uri()],
                    capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"{browser} did not finish within {timeout} s") from None
        if done.returncode != 0 or not shot.is_file():
            raise RuntimeError(f"{browser} failed ({done.returncode}): {done.stderr[-2000:]}")
        shot.replace(png)
    finally:
        shot.unlink(missing_ok=True)
    return png


def window_size(text: str) -> tuple[int, int]:
    """WIDTHxHEIGHT in pixels, both positive."""
    width, x, height = text.partition("x")
    if not (x and width.isdecimal() and height.isdecimal() and int(width) > 0 and int(height) > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT (e.g. 1280x720)")
    return int(width), int(height)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the HTML report (snakemake --report)")
    parser.add_argument("png", type=Path, help="where to write the screenshot")
    parser.add_argument("--category", default="Per-run metrics",
                        help="result category to open (default: %(default)s); '' for the start page")
    parser.add_argument("--size", default="1280x720", type=window_size,
                        help="window size, WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    width, height = args.size
    try:
        screenshot(args.report, args.png, category=args.category or None, width=width,
                   height=height)
    except (BadInput, OutputError) as error:  # OutputError: the PNG is the report, or unwritable
        why = error.strerror if isinstance(error, OutputError) else error
        print(f"report_screenshot: {why}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as error:  # no Chromium, or Chromium failed
        print(f"report_screenshot: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
