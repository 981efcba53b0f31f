// server library (to be written)
