"""Screenshots of the built site in headless Chromium, at a desktop and a phone width.

Run after building the docs (``make -C docs html-quick``)::

    python docs/screenshots.py [--out DIR]

Each shot is a page of ``docs/_build/html``, scrolled to an element (a CSS
selector; none: the top of the page), at 1100x900 and at 390x844 (a phone),
written to ``DIR`` (default ``docs/_build/screenshots``) with the layout
figures that decide whether anything is cut off: the page's scroll width
against the window's, and each shown element's width against its content's
(a wider content scrolls inside its own box).

Headless Chromium will not open a window narrower than 500 px, so the page is
loaded in an ``<iframe>`` of the shot's width on a wrapper page (served from
``localhost`` so that the wrapper can read the frame's layout) and the shot is
cropped from a tall screenshot of the wrapper.  Chromium comes from the
system's packages; cropping needs Pillow.  ``docs/_screenshots/`` keeps a few
of the shots that were looked at (reduced to 48 colours), to compare with.
"""

import argparse
import functools
import http.server
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

SITE = Path(__file__).resolve().parent / "_build" / "html"
# (page, CSS selector of the element to scroll to, which match).
SHOTS = [
    ("index.html", None, 0),
    ("index.html", "table", 0),
    ("model_selection.html", "#benchmark table", 0),
    ("api.html", None, 0),
    ("nn.html", "div.highlight", 0),
    ("cluster.html", None, 0),
    ("generated/skdp.cluster.DPKMeans.html", None, 0),
    ("generated/skdp.model_selection.DPGridSearchCV.html", None, 0),
    ("generated/skdp.model_selection.DPRandomizedSearchCV.html", None, 0),
]
SIZES = {"desktop": (1100, 900), "phone": (390, 844)}
TALL = 20000

_WRAPPER = """<!doctype html><html><body style="margin:0">
<iframe id="f" src="{src}" width="{width}" height="{tall}" style="border:0;display:block"></iframe>
<script>
document.getElementById('f').addEventListener('load', () => setTimeout(() => {{
  const d = document.getElementById('f').contentDocument, w = d.defaultView;
  const out = {{inner: w.innerWidth, scroll: d.documentElement.scrollWidth, top: 0, wide: []}};
  const sel = {selector};
  if (sel) {{
    const el = d.querySelectorAll(sel)[{index}];
    if (el) out.top = Math.round(el.getBoundingClientRect().top + w.scrollY);
  }}
  d.querySelectorAll('.bd-article pre, .bd-article .pst-scrollable-table-container, .bd-article table')
    .forEach(e => {{ if (e.scrollWidth > e.clientWidth + 1)
      out.wide.push([e.tagName.toLowerCase(), e.clientWidth, e.scrollWidth]); }});
  document.body.setAttribute('data-probe', JSON.stringify(out));
}}, 300));
</script></body></html>"""


def _serve(root):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _chromium(*args):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=180).stdout


def shoot(server, page, selector, index, size, out):
    """Write ``out`` (PNG); return the frame's layout figures (a dict)."""
    from PIL import Image

    width, height = size
    wrapper = SITE / "_screenshot_wrapper.html"
    wrapper.write_text(
        _WRAPPER.format(src=page, width=width, tall=TALL, selector=json.dumps(selector), index=index)
    )
    url = f"http://127.0.0.1:{server.server_address[1]}/{wrapper.name}"
    window = f"--window-size={max(width, 500)},{TALL}"
    try:
        dom = _chromium(window, "--virtual-time-budget=4000", "--dump-dom", url)
        probe = json.loads(html_unescape(re.search(r'data-probe="([^"]*)"', dom).group(1)))
        tall = out.with_suffix(".tall.png")
        _chromium(window, "--virtual-time-budget=4000", f"--screenshot={tall}", url)
    finally:
        wrapper.unlink()
    top = max(0, probe["top"] - 60)
    with Image.open(tall) as im:
        im.crop((0, top, width, top + height)).save(out, optimize=True)
    tall.unlink()
    return probe


def html_unescape(text):
    import html

    return html.unescape(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SITE.parent / "screenshots")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    server = _serve(SITE)
    try:
        for page, selector, index in SHOTS:
            for name, size in SIZES.items():
                tag = re.sub(r"\W+", "-", selector or "top").strip("-")
                out = args.out / f"{Path(page).stem}-{tag}-{name}.png"
                probe = shoot(server, page, selector, index, size, out)
                cut = "CUT" if probe["scroll"] > probe["inner"] else "fits"
                print(f"{out.name}: window {probe['inner']} px, page {probe['scroll']} px ({cut}); "
                      f"scrolling boxes {probe['wide']}")
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
