#!/usr/bin/env python3
"""Compares two flame graph SVGs frame by frame: flamegraph.pl's and luaflame's.

  compare.py FLAMEGRAPH_PL.svg LUAFLAME.svg [--no-colour]

A frame is (title without luaflame's ", self N", x, y, width, colour class).
Prints one summary line: frames in each, how many differ in each respect,
and the first few differences; exits 1 when anything differs.

Colour classes come from the relations between the channels, which survive
luaflame's 3-digit colours: flamegraph.pl's palettes each keep two channels
equal (red: g=b<r, aqua: g=b>r, green: r=b<g, purple: r=b>g, yellow: r=g>b,
blue: r=g<b, orange: b=0), and the differential scale is white, red or blue.
"""
import html
import re
import sys

FRAME = re.compile(r'<title>(.*?)</title>\s*<rect x="([-0-9.]+)" y="([-0-9.]+)" width="([-0-9.]+)"'
                   r'[^>]*?fill="([^"]+)"', re.S)


def rgb(fill):
    m = re.match(r'rgb\((\d+),(\d+),(\d+)\)', fill)
    if m:
        return tuple(int(v) >> 4 for v in m.groups())  # compare at 4 bits, as luaflame writes
    m = re.match(r'#([0-9a-f])([0-9a-f])([0-9a-f])$', fill)
    if m:
        return tuple(int(v, 16) for v in m.groups())
    return None


def colour_class(fill):
    c = rgb(fill)
    if c is None:
        return fill
    r, g, b = c
    if r == g == b:
        return 'white' if r >= 14 else 'grey'
    if b == 0 and r > g:
        return 'orange'
    if g == b:
        return 'red' if r > g else 'aqua'
    if r == b:
        return 'green' if g > r else 'purple'
    if r == g:
        return 'yellow' if b < r else 'blue'
    return 'other'


def frames(path, luaflame):
    text = open(path, encoding='utf-8', errors='replace').read()
    out = []
    for title, x, y, w, fill in FRAME.findall(text):
        title = html.unescape(title)
        if luaflame:
            title = re.sub(r', self [0-9,.]+$', '', title)
        out.append((title, float(x), float(y), float(w), colour_class(fill)))
    return out


def main():
    fg, lf = frames(sys.argv[1], False), frames(sys.argv[2], True)
    if '--no-colour' in sys.argv[3:]:
        fg = [f[:4] + ('',) for f in fg]
        lf = [f[:4] + ('',) for f in lf]
    keyed = lambda fs: {(t, x, y): (w, c) for t, x, y, w, c in fs}
    a, b = keyed(fg), keyed(lf)
    missing = sorted(set(a) - set(b))
    extra = sorted(set(b) - set(a))
    width = [k for k in a if k in b and a[k][0] != b[k][0]]
    colour = [k for k in a if k in b and a[k][1] != b[k][1]]
    titles_a = sorted(t for t, *_ in fg)
    titles_b = sorted(t for t, *_ in lf)
    same_titles = titles_a == titles_b
    print(f'frames {len(fg)} {len(lf)}  missing {len(missing)} extra {len(extra)} '
          f'width {len(width)} colour {len(colour)} titles {"same" if same_titles else "differ"}')
    for k in missing[:3]:
        print('  only flamegraph.pl:', k)
    for k in extra[:3]:
        print('  only luaflame:    ', k)
    for k in width[:3]:
        print('  width:', k, a[k][0], b[k][0])
    for k in colour[:3]:
        print('  colour:', k, a[k][1], b[k][1])
    return 0 if not (missing or extra or width or colour) and len(fg) == len(lf) else 1


if __name__ == '__main__':
    sys.exit(main())
