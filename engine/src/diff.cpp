// engine: diff stage (to be written)
#include "luaflame/diff.hpp"
