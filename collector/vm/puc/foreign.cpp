// Foreign code's frames, copied by the signal handler (foreign.hpp: the
// contract). Loads only: no call, no allocation, no lock.
#include "vm/puc/foreign.hpp"

#include "vm/puc/hookchain.hpp"

namespace lfc::foreign {

namespace {

using luaint::at;

// CallInfos looked at below L->ci for the anchor: a finalizer or a hook
// deeper than this is charged without its frames.
constexpr int kMaxWalk = 256;

// The source string's first bytes (a Lua function's name is made from them
// at the hook: FrameTable::of_copy).
void copy_source(const void* ts, FrameCopy& f) {
  std::size_t len = 0;
  if (!luaint::tstring_len(ts, len)) return;
  f.cut = len > FrameCopy::kText;
  f.len = static_cast<uint16_t>(f.cut ? FrameCopy::kText : len);
  const char* s = static_cast<const char*>(ts) + luaint::kTStringContents;
  for (std::size_t i = 0; i < f.len; ++i) f.text[i] = s[i];
}

// The function `ci` runs, when its func slot lies on L's stack.
bool copy_frame(const lua_State* L, const void* ci, FrameCopy& f) {
  const char* stack = at<const char*>(L, luaint::kStateStack);
  const char* last = at<const char*>(L, luaint::kStateStackLast);
  const char* func = at<const char*>(ci, 0);
  if (func < stack || func >= last || !luaint::stack_settled(L)) return false;
  unsigned char tag = 0;
  const void* value = nullptr;
  luaint::func_of(ci, tag, value);
  f.ident = nullptr, f.line = 0, f.c = false, f.cut = false, f.len = 0;
  if (tag == luaint::kTagLightC) {
    f.c = true, f.ident = value;
  } else if (tag == luaint::kTagCClosure) {
    f.c = true, f.ident = at<const void*>(value, luaint::kClosureFn);
  } else if (tag == luaint::kTagLuaClosure) {
    const void* proto = at<const void*>(value, luaint::kClosureFn);
    const void* src = at<const void*>(proto, luaint::kProtoSource);
    if (!src) return false;
    f.line = at<int>(proto, luaint::kProtoLine);
    f.ident = static_cast<const char*>(src) + luaint::kTStringContents;
    copy_source(src, f);
  } else {
    return false;
  }
  return true;
}

}  // namespace

bool copy_foreign(const lua_State* L, const luaint::Layout& layout, Copy& out) {
  out.anchor = nullptr;
  out.kind = Copy::kNone;
  out.nframes = 0;
  out.deeper = false;
  if constexpr (luaint::kRelease == 0) {
    // No lf_hook running and the thread's hook the program's: that hook
    // (called by Lua directly while nothing is armed); else a finalizer.
    const lua_Hook h = lua_gethook(const_cast<lua_State*>(L));
    const bool program = !t_own_hook.running && h && h != lf_hook && h != lf_hook_after_stop;
    out.kind = t_own_hook.forwarding || program ? Copy::kHook : Copy::kFinalizer;
    return true;
  }
  // Leaf first, into a ring: the kMaxFrames CallInfos nearest the anchor stay.
  const void* seen[Copy::kMaxFrames] = {};
  int n = 0;
  const void* ci = luaint::state_ci(L);
  for (int i = 0; ci && i < kMaxWalk; ++i, ci = luaint::ci_prev(ci)) {
    const unsigned short st = luaint::ci_status(ci);
    if (st & (luaint::kCistHooked | luaint::kCistFin)) {
      out.anchor = ci;
      out.kind = (st & luaint::kCistHooked) ? Copy::kHook : Copy::kFinalizer;
      break;
    }
    seen[n % Copy::kMaxFrames] = ci;
    ++n;
  }
  if (!out.anchor) {
    // 5.2 marks no finalizer: with no hook below, hooks are off for one
    // (GCTM), whose first frame is not known. Charged as one frame.
    if (luaint::kCistFin != 0 || ci) return false;
    out.kind = Copy::kFinalizer;
    return true;
  }
  if (!layout.copy_ok) return true;
  out.deeper = n > Copy::kMaxFrames;
  const int kept = n < Copy::kMaxFrames ? n : Copy::kMaxFrames;
  // Root first: the one just above the anchor is the last seen.
  for (int j = 0; j < kept; ++j) {
    const void* c = seen[(n - 1 - j) % Copy::kMaxFrames];
    if (!copy_frame(L, c, out.frames[out.nframes])) break;
    ++out.nframes;
  }
  return true;
}

}  // namespace lfc::foreign
