io.write("out 1\n")
io.stderr:write("err 1\n")
print(("x"):rep(3), 1.5, nil, true)
io.stdout:write("out 2\n")
