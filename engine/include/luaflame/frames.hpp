// luaflame engine, stage 4 beside the SVG: the laid-out frames as data.
//
// The flame graph render_svg draws, as numbers a page draws itself (SVG or
// canvas) without parsing markup or titles back: the same frames, in the
// same order, at the same x and width, with the same colours, for the same
// tree and options. Format "luaflame-frames", version 1: one JSON text
// (RFC 8259), numbers in shortest round-trip form.
//
// clang-format off
//   document   = "{" "\"format\":\"luaflame-frames\"," "\"version\":1,"
//                    "\"width\":" W "," "\"frame_height\":" H "," "\"font_size\":" F ","
//                    "\"font_width\":" FW "," "\"inverted\":" bool "," "\"differential\":" bool ","
//                    "\"negate\":" bool "," "\"show_self\":" bool ","
//                    "\"unit\":" unit "," "\"count_name\":" string ","
//                    "\"factor\":" number "," "\"total\":" number "," "\"depth\":" D ","
//                    "\"stride\":" S "," "\"names\":[" string {"," string} "],"
//                    "\"colors\":[" [ rgb {"," rgb} ] "]," "\"frames\":[" frames "]}"
//   unit       = "\"\"" | "\"ns\"" | "\"bytes\""         ; how values read: counts, time, bytes
//   rgb        = "\"#" 3 hex digits "\""                 ; 4 bits a channel, as the SVG's fills
//   frames     = [ frame {"," frame} ]                   ; depth-first pre-order, root first
//   frame      = depth "," x "," width "," name "," color "," total "," self [ "," delta ]
//                                                        ; S numbers: 7, or 8 when differential
// clang-format on
//
//   W, H, F, FW   the --width, --height (one row's step, the gap of 1 included), --fontsize
//                 and --fontwidth the layout used: a label fits when
//                 floor(width / (F * FW)) >= 3 characters, as in the SVG.
//   total         what 100% is (the root's value; --total when larger).
//   show_self     whether a frame's self is worth showing (false when the tree was cut and a
//                 self holds the children cut away: the sandwich's halves).
//   D             the deepest frame's depth (the root is depth 0).
//   depth         the frame's row: y = D - depth rows from the top, or depth rows when
//                 inverted.
//   x, width      pixels from the left edge (10 px padding included), one decimal, as the
//                 SVG's rects (width = rounded right edge - rounded left edge).
//   name, color   indexes into "names" (sanitized UTF-8, flamegraph.pl's _[k] annotations
//                 dropped; names[0] is "all", the root) and "colors".
//   total, self   the frame's value and its own part, in the tree's units (multiply by
//                 "factor" to show them, as the SVG's titles do).
//   delta         differential graphs: the frame's self after less before (negated by
//                 "negate" when shown; red when it grew).
//
// A reader refuses a "format" or "version" it does not know. Version 2
// will be a new value of "version"; fields are never reinterpreted.
#pragma once

#include <string>

#include "luaflame/svg.hpp"
#include "luaflame/tree.hpp"

namespace lf {

/// The version of the format above that render_frames writes.
inline constexpr int kFramesVersion = 1;

/// Lays out `tree` (finalized) as render_svg would with `opts` (the
/// options that change the layout, colours and values: width, height,
/// fontsize, fontwidth, minwidth, colors, hash, inverted, flamechart,
/// total, factor, negate, unit, countname, differential_as_after,
/// max_name_bytes) and appends the frames, in the format above, to `out`.
/// Returns the number of frames.
std::size_t render_frames(const Tree& tree, const SvgOptions& opts, std::string& out);

}  // namespace lf
