// luaflame engine, stage 4: rendering an interactive SVG flame graph.
//
// The output follows flamegraph.pl's structure (one <g> per frame with
// <title>, <rect>, <text>), is standalone (inline CSS and JS, nothing loaded
// from the network), byte-identical for the same input and options, and is
// well-formed XML whatever bytes the frame names hold.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "luaflame/tree.hpp"

namespace lf {

/// Options of the render stage; names follow flamegraph.pl's flags.
struct SvgOptions {
  std::string title =
      "Flame Graph";  ///< --title; default "Flame Graph" ("Icicle Graph" when inverted and not set)
  std::string subtitle;   ///< --subtitle; default none
  int width = 1200;       ///< --width, image width in pixels; default 1200
  int frame_height = 16;  ///< --height, frame height in pixels; default 16
  double font_size = 12;  ///< --fontsize; default 12
  std::string font_type =
      "Verdana";  ///< --fonttype; default Verdana (only letters, digits, space , - _ . kept)
  double font_width =
      0.59;  ///< --fontwidth: average glyph width / font size, for label fitting; default 0.59
  double min_width = 0.1;  ///< --minwidth in pixels; default 0.1
  bool min_width_percent =
      false;  ///< --minwidth given as N%: min_width is a percentage of the total
  std::string count_name = "samples";   ///< --countname; default "samples"
  std::string name_type = "Function:";  ///< --nametype; default "Function:"
  std::string colors = "lua";  ///< --colors palette; default "lua" (hot mem io red green blue aqua
                               ///< yellow purple orange lua)
  bool hash =
      false;  ///< --hash: colour by name hash; default false (lua palette is always stable by name)
  bool inverted = false;  ///< --inverted: icicle graph; default false
  bool reverse = false;   ///< unused by render_svg(): --reverse is the caller's (lf::reverse_stack
                          ///< before Tree::add)
  bool flamechart =
      false;  ///< --flamechart: children in input order, not by name (x is time); default false.
              ///< For a true flame chart also build the tree with Tree::set_flamechart(true).
  double total = 0;   ///< --total: override the total used for widths/percentages; default 0 = sum
  double factor = 1;  ///< --factor: multiply counts in titles; default 1
  bool negate = false;  ///< --negate: swap red/blue in differentials; default false
  std::string notes;    ///< --notes: text placed in the SVG's notes element; default none
  std::string
      unit;  ///< count unit for titles: "" (plain), "ns" (time), "bytes" (KiB/MiB); default ""
  bool differential_as_after =
      true;  ///< widths from the "after" column in differential graphs; default true
  std::size_t max_name_bytes = 4096;  ///< longest frame name put in a title, in bytes (longer ones
                                      ///< end in "..."); default 4096
  bool show_self =
      true;  ///< add ", self N" to titles of frames with self time and children; default true
};

/// Renders `tree` (finalized) as SVG, appending to `out`. Returns the number
/// of frames drawn.
std::size_t render_svg(const Tree& tree, const SvgOptions& opts, std::string& out);

/// Same, handing the output to `sink` in pieces of about 1 MiB (for output
/// too big to hold: --minwidth 0 on millions of frames).
std::size_t render_svg(const Tree& tree, const SvgOptions& opts,
                       const std::function<void(std::string_view)>& sink);

/// Whether `name` is a palette render_svg knows ("lua", "hot", "mem", ...).
bool known_palette(const std::string& name);

/// Renders the valid "no data" SVG flamegraph.pl gives for empty input.
void render_empty_svg(const SvgOptions& opts, const std::string& message, std::string& out);

}  // namespace lf
