// engine: folded stage (to be written)
#include "luaflame/folded.hpp"
