// engine: svg stage (to be written)
#include "luaflame/svg.hpp"
