#!/usr/bin/env python3
"""Reads a feedtune HTML page back with a real HTML parser (html.parser) and
prints, as one JSON object, what the tests check: every element that carries
data-* attributes (charts' points, reference lines, knee, table rows), the
page's external references (there must be none), and whether tags balance.

Usage: html_points.py FILE.html
"""
import json
import sys
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Reader(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []
        self.errors = []
        self.elements = []
        self.external = []
        self.svg_count = 0
        self.title = ""
        self._in_title = False
        self.tables = {}
        self._table = None
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg":
            self.svg_count += 1
        for key in ("src", "href"):
            value = attrs.get(key)
            if value is not None and not value.startswith("#"):
                self.external.append(value)
        if tag == "link" or (tag == "script" and attrs.get("src")):
            self.external.append(tag)
        classes = attrs.get("class", "") or ""
        if any(k.startswith("data-") for k in attrs):
            self.elements.append({"tag": tag, "class": classes, "parents": [t for t, _ in self.stack],
                                  "parent_classes": [c for _, c in self.stack],
                                  "data": {k[5:]: v for k, v in attrs.items() if k.startswith("data-")}})
        if tag == "title":
            self._in_title = True
        if tag == "table":
            self._table = classes
            self.tables.setdefault(classes, [])
        if tag == "tr" and self._table is not None:
            self._row = []
        if tag in ("td", "th") and self._row is not None:
            self._cell = ""
        if tag not in VOID:
            self.stack.append((tag, classes))

    def handle_startendtag(self, tag, attrs):
        # <circle .../>: a complete element (SVG) or a void one.
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append("unbalanced </%s> at line %d (open: %s)" % (
                tag, self.getpos()[0], [t for t, _ in self.stack[-3:]]))
            return
        self.stack.pop()
        if tag == "title":
            self._in_title = False
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        if tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        # The page's <title>, not the SVG charts' own <title> elements.
        if self._in_title and "svg" not in [t for t, _ in self.stack]:
            self.title += data
        if self._cell is not None:
            self._cell += data


def main():
    reader = Reader()
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    reader.feed(text)
    reader.close()
    if reader.stack:
        reader.errors.append("unclosed: %s" % [t for t, _ in reader.stack])
    json.dump({"title": reader.title, "doctype": text.lstrip().lower().startswith("<!doctype html>"),
               "errors": reader.errors, "external": reader.external, "svg_count": reader.svg_count,
               "elements": reader.elements, "tables": reader.tables}, sys.stdout)


if __name__ == "__main__":
    main()
