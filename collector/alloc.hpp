// The allocation profiler's state (alloc.cpp).
#pragma once

namespace lfc {

struct AllocState {};

}  // namespace lfc
