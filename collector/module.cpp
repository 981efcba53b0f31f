// Lua module entry (to be written)
