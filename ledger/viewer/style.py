"""The viewer's one style sheet, inlined in every page (no font, image or file is
fetched: the Content-Security-Policy allows inline styles and nothing else).

>>> "font" in STYLE and "@import" not in STYLE and "url(" not in STYLE
True
"""

from __future__ import annotations

__all__ = ["STYLE"]

STYLE = """
:root{--bg:#f6f7f9;--card:#fff;--ink:#1f2328;--muted:#656d76;--line:#d8dee4;
--accent:#2f5bd3;--ok:#1a7f37;--ok-bg:#dafbe1;--bad:#cf222e;--bad-bg:#ffebe9;
--warn:#9a6700;--warn-bg:#fff8c5;--info-bg:#ddf4ff;--mono:ui-monospace,SFMono-Regular,
"SF Mono",Menlo,Consolas,"Liberation Mono",monospace}
*{box-sizing:border-box}
html{background:var(--bg)}
body{margin:0;color:var(--ink);font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif;overflow-wrap:anywhere}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{background:#111827;color:#e5e7eb;padding:.55em 1.5em;display:flex;
align-items:center;gap:1.5em;flex-wrap:wrap}
header.top .brand{font-weight:700;color:#fff;letter-spacing:.02em}
header.top nav{display:flex;gap:1em}header.top nav a{color:#cbd5e1}
header.top nav a.here{color:#fff;border-bottom:2px solid #60a5fa}
header.top .db{margin-left:auto;font:12px var(--mono);color:#9ca3af}
main{max-width:1180px;margin:0 auto;padding:1.2em 1.5em 3em}
h1{font-size:1.45em;margin:.2em 0 .3em}h2{font-size:1.1em;margin:1.6em 0 .5em}
h3{font-size:1em;margin:0}
.muted{color:var(--muted)}.small{font-size:12px}
code,.mono{font-family:var(--mono);font-size:12.5px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;
padding:.8em 1em;margin:.6em 0}
.crumbs{font-size:13px;color:var(--muted);margin-bottom:.3em}
.stats{display:flex;flex-wrap:wrap;gap:.6em;margin:.6em 0}
.stat{background:var(--card);border:1px solid var(--line);border-radius:8px;
padding:.45em .9em;min-width:7.5em}
.stat b{display:block;font-size:1.35em;font-variant-numeric:tabular-nums}
.stat span{color:var(--muted);font-size:12px}
.stat.bad{border-color:#ff8182;background:var(--bad-bg)}
.stat.ok{border-color:#4ac26b;background:var(--ok-bg)}
table{border-collapse:collapse;width:100%;background:var(--card);
border:1px solid var(--line);border-radius:8px;overflow:hidden;table-layout:auto}
th,td{padding:.45em .6em;text-align:left;vertical-align:top;border-bottom:1px solid
var(--line)}
th{background:#f0f2f5;font-weight:600;font-size:12.5px;color:#424a53;white-space:nowrap}
tbody tr:hover{background:#f8fafc}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.t{white-space:nowrap;font-variant-numeric:tabular-nums}
td.id{font-family:var(--mono);font-size:12px;word-break:break-all}
td.run-id{min-width:10em;max-width:15em}td.req{min-width:13em}
td.req .v{font-family:inherit;font-size:13px}td.who{min-width:8em;max-width:14em}
td.who .mono{word-break:break-all}
.scroll{overflow-x:auto;max-width:100%}
tr.denied td{background:#fff5f5}
.badge{display:inline-block;padding:.05em .55em;border-radius:999px;font-size:12px;
font-weight:600;border:1px solid transparent;white-space:nowrap;line-height:1.6}
.b-allowed,.b-succeeded,.b-intact,.b-ended,.b-ok{color:var(--ok);background:var(--ok-bg);
border-color:#aceebb}
.b-denied,.b-failed,.b-drifted,.b-bad,.b-corrupt{color:var(--bad);background:var(--bad-bg);
border-color:#ffcecb}
.b-needs_approval,.b-missing,.b-open,.b-warn,.b-no_result{color:var(--warn);
background:var(--warn-bg);border-color:#eed888}
.b-unverifiable,.b-none,.b-read,.b-info{color:#424a53;background:#eef1f4;
border-color:#d0d7de}
form.filters{display:flex;flex-wrap:wrap;gap:.5em .8em;align-items:flex-end;
background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.7em 1em}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:var(--muted);
gap:.15em}
form.filters input,form.filters select{font:inherit;font-size:13px;padding:.3em .45em;
border:1px solid var(--line);border-radius:6px;background:#fff;color:var(--ink);
width:11em;max-width:100%}
form.filters input.wide{width:16em}
button,.button{font:inherit;font-size:13px;padding:.35em .9em;border-radius:6px;
border:1px solid #1f4fbf;background:var(--accent);color:#fff;cursor:pointer}
a.button.plain,button.plain{background:#fff;color:var(--ink);border-color:var(--line)}
.pager{display:flex;gap:.8em;align-items:center;margin:.8em 0}
.note{border-radius:8px;padding:.6em 1em;margin:.6em 0;border:1px solid}
.note.bad{background:var(--bad-bg);border-color:#ff8182}
.note.ok{background:var(--ok-bg);border-color:#4ac26b}
.note.warn{background:var(--warn-bg);border-color:#d4a72c}
.note.info{background:var(--info-bg);border-color:#54aeff}
.timeline{list-style:none;margin:.5em 0;padding:0 0 0 1.4em;border-left:2px solid
var(--line)}
.timeline>li{position:relative;margin:0 0 .7em}
.timeline>li::before{content:"";position:absolute;left:-1.86em;top:1.05em;width:.8em;
height:.8em;border-radius:50%;background:#fff;border:2px solid #8c959f}
.timeline>li.action::before{border-color:var(--accent)}
.timeline>li.denied::before{border-color:var(--bad);background:var(--bad)}
.timeline>li.failed::before{border-color:var(--bad)}
.timeline>li.read::before{border-color:#8c959f}
.timeline>li .card{margin:0}
.timeline>li.denied .card{border-color:#ff8182;background:#fffafa;
border-left:4px solid var(--bad)}
.timeline>li.failed .card{border-left:4px solid var(--bad)}
.timeline>li.minor .card{padding:.35em 1em;background:#fbfbfc}
.head{display:flex;flex-wrap:wrap;gap:.4em .8em;align-items:baseline}
.head .when{margin-left:auto;color:var(--muted);font-size:12px;
font-variant-numeric:tabular-nums}.head .offset{color:#8c959f;margin-left:.3em}
.quick{font-size:13px;margin:.2em 0 .5em;color:var(--muted)}.quick a{margin:0 .25em}
dl.kv{display:grid;grid-template-columns:minmax(6em,max-content) minmax(0,1fr);
gap:.25em 1em;margin:.5em 0 0}
dl.kv dt{color:var(--muted);font-size:12.5px}dl.kv dd{margin:0;min-width:0}
.v{font-family:var(--mono);font-size:12.5px;white-space:pre-wrap;word-break:break-all}
pre{margin:.3em 0;padding:.6em .8em;background:#f6f8fa;border:1px solid var(--line);
border-radius:6px;white-space:pre-wrap;word-break:break-all;font:12.5px/1.45 var(--mono);
max-height:32em;overflow:auto}
details.clip>summary{cursor:pointer;list-style:none}
details.clip>summary::-webkit-details-marker{display:none}
details.clip>summary .more{color:var(--accent);font-size:12px;margin-left:.4em}
details.clip[open]>summary .v{display:none}
ul.refs{list-style:none;margin:0;padding:0}ul.refs li{margin:.1em 0}
.ctl{color:var(--bad);background:var(--bad-bg);border-radius:3px;padding:0 .15em;
font-family:var(--mono);font-size:11px}
.anom{color:var(--warn)}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(20em,1fr));gap:.8em}
footer{color:var(--muted);font-size:12px;text-align:center;margin-top:2em}
svg{max-width:100%;height:auto}
"""
