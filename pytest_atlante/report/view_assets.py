"""The inline stylesheet and script of the HTML view (``view.py``): no network, no CDN.

The script only sorts the scenario table, hides its passing rows on request and opens/closes
sections; every piece of report text is already escaped HTML when it arrives, and the page's Content-Security-Policy allows this exact
script (by hash) and nothing else, so text that looks like markup can never run.
"""

from __future__ import annotations

import base64
import hashlib

CSS = """
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--soft:#f6f8fa;--pass:#1a7f37;--fail:#cf222e;
--warn:#9a6700;--info:#0969da;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg)}
body{margin:0;background:var(--bg);line-height:1.45}
main{max-width:1200px;margin:0 auto;padding:1rem}
h1{font-size:1.5rem;margin:.5rem 0}h2{font-size:1.25rem;margin:1.5rem 0 .5rem;border-bottom:1px solid var(--line)}
h3{font-size:1.1rem;margin:1.25rem 0 .25rem;overflow-wrap:anywhere}h4{font-size:1rem;margin:.75rem 0 .25rem}
dl.meta{display:grid;grid-template-columns:repeat(auto-fit,minmax(17rem,1fr));gap:.25rem 1rem;margin:0}
dl.meta div{display:flex;gap:.5rem}dl.meta dt{color:var(--muted)}dl.meta dd{margin:0;overflow-wrap:anywhere}
.table-wrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
caption{text-align:left;color:var(--muted);padding:.25rem 0}
th,td{border-bottom:1px solid var(--line);padding:.35rem .5rem;text-align:right;vertical-align:top}
tr>:first-child{text-align:left;overflow-wrap:break-word;min-width:8rem}
th button{font:inherit;font-weight:600;background:none;border:0;padding:0;cursor:pointer;color:inherit}
th[aria-sort=ascending] button::after{content:" \\25B2"}th[aria-sort=descending] button::after{content:" \\25BC"}
.bar{position:relative;display:inline-block;width:6rem;height:.6rem;background:var(--soft);border:1px solid var(--line);
vertical-align:middle;margin-left:.4rem}
.bar.ran{background:#ffcecb}.bar .fill{position:absolute;top:0;bottom:0;left:0;background:#4ac26b}
.bar .iv{position:absolute;top:0;bottom:0;background:rgba(9,105,218,.25);outline:1px solid var(--info)}
.bar .pt{position:absolute;top:-2px;bottom:-2px;width:2px;background:var(--fg)}
.banner{font-size:1.1rem;padding:.6rem .9rem;border-radius:6px;margin:.5rem 0 .75rem;color:#fff;background:var(--muted)}
.banner strong{margin-right:.5rem}.banner.pass{background:var(--pass)}.banner.fail{background:var(--fail)}
.banner.incomplete{background:var(--warn)}
tr.v-fail>th{border-left:4px solid var(--fail);background:#fff0f0}tr.v-pass>th{border-left:4px solid var(--pass)}
tr.v-not-run>th{border-left:4px solid var(--warn);background:#fff8e5}
.why{font-weight:400;font-size:.85rem;color:var(--fail);overflow-wrap:anywhere}
#scenario-table.failures-only tr.v-pass{display:none}
ol.paired{list-style:none;padding:0 0 0 1rem;margin:.1rem 0;border-left:2px dotted var(--line)}
.chip{display:inline-block;border-radius:1rem;padding:0 .6rem;font-size:.85rem;font-weight:600;color:#fff;background:var(--muted)}
.chip.pass{background:var(--pass)}.chip.fail{background:var(--fail)}.chip.timeout,.chip.budget-exceeded{background:var(--warn)}
.chip.infra-error{background:#6e40c9}
article.trial{border:1px solid var(--line);border-radius:6px;padding:.5rem .75rem;margin:.5rem 0}
ul.checks{list-style:none;padding:0;margin:.25rem 0}ul.checks li{padding:.15rem 0;overflow-wrap:anywhere}
.ok{color:var(--pass);font-weight:600}.bad{color:var(--fail);font-weight:600}
button.toggle{font:inherit;background:var(--soft);border:1px solid var(--line);border-radius:4px;padding:.15rem .6rem;
cursor:pointer;margin:.25rem .25rem .25rem 0}
button:focus-visible,a:focus-visible{outline:3px solid var(--info);outline-offset:2px}
pre{background:var(--soft);border:1px solid var(--line);padding:.5rem;overflow-x:auto;font-size:.85rem;max-height:32rem;
white-space:pre-wrap;overflow-wrap:anywhere}
.note{color:var(--muted);font-size:.9rem}.error{color:var(--fail);white-space:pre-wrap;overflow-wrap:anywhere}
ol.timeline{list-style:none;padding:0;margin:.25rem 0;border-left:3px solid var(--line)}
ol.timeline>li{padding:.2rem .6rem;margin:.15rem 0;overflow-wrap:anywhere}
ol.timeline .kind{font-size:.8rem;color:var(--muted);margin-right:.4rem}
ol.timeline li.crossed,ol.timeline li.abort{border-left:4px solid var(--fail);background:#fff0f0}
ol.timeline li.sub{margin-left:1.5rem}
ol.timeline li.linked{outline:3px solid var(--info)}
.diff-add{color:var(--pass)}.diff-del{color:var(--fail)}
@media (max-width:600px){main{padding:.5rem}th,td{padding:.3rem}.bar{width:3.5rem}.hide-narrow{display:none}}
"""

JS = """
(function(){
  function reveal(id){
    var el = document.getElementById(id);
    for (var p = el; p; p = p.parentElement) {
      if (p.hidden) {
        p.hidden = false;
        var c = document.querySelector('button[aria-controls="' + p.id + '"]');
        if (c) { c.setAttribute('aria-expanded', 'true'); }
      }
    }
    if (el) { el.classList.add('linked'); }
  }
  if (location.hash) { reveal(decodeURIComponent(location.hash.slice(1))); }
  var only = document.getElementById('failures-only');
  if (only) {
    only.addEventListener('change', function(){
      document.getElementById('scenario-table').classList.toggle('failures-only', only.checked);
    });
  }
  document.addEventListener('click', function(ev){
    var a = ev.target.closest('a.event-link');
    if (a) { reveal(a.getAttribute('href').slice(1)); return; }
    var b = ev.target.closest('button[aria-controls]');
    if (b) {
      var t = document.getElementById(b.getAttribute('aria-controls'));
      var open = b.getAttribute('aria-expanded') !== 'true';
      b.setAttribute('aria-expanded', String(open));
      if (t) { t.hidden = !open; }
      return;
    }
    var s = ev.target.closest('th[data-sort] button');
    if (!s) { return; }
    var th = s.parentElement, table = th.closest('table'), body = table.tBodies[0];
    var col = Array.prototype.indexOf.call(th.parentElement.children, th);
    var dir = th.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending';
    Array.prototype.forEach.call(th.parentElement.children, function(c){ c.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir);
    var numeric = th.getAttribute('data-sort') === 'number', sign = dir === 'ascending' ? 1 : -1;
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function(a, b){
      var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
      if (numeric) {
        var nx = x === '' ? -Infinity : Number(x), ny = y === '' ? -Infinity : Number(y);
        return sign * (nx - ny);
      }
      return sign * x.localeCompare(y);
    });
    rows.forEach(function(r){ body.appendChild(r); });
  });
})();
"""


def script_hash() -> str:
    """The CSP source that allows exactly :data:`JS`."""
    digest = hashlib.sha256(JS.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"
