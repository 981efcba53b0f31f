// engine: tree stage (to be written)
#include "luaflame/tree.hpp"
