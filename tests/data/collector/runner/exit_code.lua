io.write("partial line")
os.exit(3)
