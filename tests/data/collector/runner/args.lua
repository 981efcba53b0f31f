-- The arg table and the chunk's varargs, as lua5.4 sets them.
print(arg[0], #arg, select("#", ...), ...)
for i = 1, #arg do io.write(i, "=", arg[i], " ") end
print()
