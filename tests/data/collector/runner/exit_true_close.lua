print("closing")
os.exit(true, true)
