"""The shareable page of a run or a comparison: :mod:`.document` makes the JSON document (what
``labctl report --format json`` prints), :mod:`.page` renders it as one self-contained HTML file
(Jinja2, autoescaped; matplotlib SVG plots inline; no scripts, fonts or network)."""
