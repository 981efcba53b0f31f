// collector core (to be written)
