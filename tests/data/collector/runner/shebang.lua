#!/usr/bin/env lua5.4
-- A shebang line is skipped.
print("shebang ok")
