"""Fleets on one box: the demo (a real fleet with the console) and `simulate` (hundreds of robots, measured)."""
